// Package readiness decides whether searchd can take traffic: its database
// answers and the schema has every migration of this binary applied. A
// schema newer than the binary (a newer release migrated first, during a
// rolling upgrade) is ready: migrations are expand-then-contract (see
// package migrations), so this binary serves it correctly. The binary builds a
// check here and hands its Ready to the HTTP edge (api.Deps.Ready), which
// only asks it and knows no database.
package readiness

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/searchd/searchd/internal/loop"
	"github.com/searchd/searchd/migrations"
)

// DefaultInterval is how often a [Checker] checks by default.
const DefaultInterval = 2 * time.Second

// Timeout bounds one check, so a hung database reads as not ready rather
// than hanging the check.
const Timeout = 3 * time.Second

// ConnectTimeout bounds making the checker's connection when it has none,
// apart from the check's Timeout. On a busy machine a new connection can
// take longer than a check may, and a checker that gave up on connecting
// would connect afresh and give up at every check, answering not ready
// while the database serves every request (the fault suite saw /readyz
// 503 for half a minute after a blackhole healed, with two CPU hogs).
// While it connects, Ready reports the last result for a check's Timeout,
// and not ready after it: a database that does not answer (a blackholed
// primary) reads as not ready within an interval and the Timeout, as it
// would if the whole check were bounded by the Timeout.
const ConnectTimeout = 15 * time.Second

// errNotCheckedYet is the readiness of a checker whose first check has not
// finished.
var errNotCheckedYet = errors.New("readiness: not checked yet")

// Checker checks readiness (the database answers and its schema has
// every migration of this binary) in the background, every interval, on one
// connection of its own, and answers /readyz from the last result. A probe
// then costs no round trip on the request pool, however many probers there
// are, and a pool held by slow requests does not make readiness flap. It
// is safe for concurrent use.
type Checker struct {
	db       *sql.DB
	interval time.Duration
	last     atomic.Pointer[readyResult]
	// checking is when the check under way began, in Unix nanoseconds;
	// 0 when none is.
	checking atomic.Int64
	logger   *slog.Logger
	// newerLogged is the newer schema version last logged, so a replica
	// says it once per version rather than every interval.
	newerLogged atomic.Int64
}

type readyResult struct {
	err error
	at  time.Time
}

// NewChecker returns a checker that connects with cfg (a copy; the
// caller may pass a pool's ConnConfig) and checks every interval (zero is
// [DefaultInterval]). It logs to logger (nil: nowhere) once per version
// when the schema is newer than this binary. It opens no connection until
// [Checker.Run].
func NewChecker(cfg *pgx.ConnConfig, interval time.Duration, logger *slog.Logger) *Checker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	conn := cfg.Copy()
	conn.Tracer = nil // a probe every interval is not worth a span each
	db := stdlib.OpenDB(*conn)
	// One connection, kept: database/sql reconnects after a failure.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	r := &Checker{db: db, interval: interval, logger: logger}
	r.last.Store(&readyResult{err: errNotCheckedYet, at: time.Now()})
	return r
}

// Run checks at once and then an interval after each check until ctx ends,
// then closes its connection and returns.
func (r *Checker) Run(ctx context.Context) {
	defer r.db.Close()
	loop.Loop{}.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		r.Check(ctx)
		return loop.Next{Wait: r.interval}, nil
	})
}

// Check checks once, now, and keeps the result for [Checker.Ready]:
// a server checks before it serves, so it is ready from its first probe.
func (r *Checker) Check(ctx context.Context) {
	r.checking.Store(time.Now().UnixNano())
	defer r.checking.Store(0)
	// The one connection first, made if it is not there: it returns to
	// the pool as its idle connection, which the check then uses.
	cctx, ccancel := context.WithTimeout(ctx, ConnectTimeout)
	conn, err := r.db.Conn(cctx)
	ccancel()
	if err == nil {
		_ = conn.Close()
		qctx, cancel := context.WithTimeout(ctx, Timeout)
		err = r.db.PingContext(qctx)
		if err == nil {
			var schema migrations.Schema
			schema, err = migrations.CheckDB(qctx, r.db)
			if err == nil {
				r.logNewer(schema)
			}
		}
		cancel()
	}
	r.last.Store(&readyResult{err: err, at: time.Now()})
}

// logNewer logs, once per version, that the schema is newer than this
// binary: ready all the same, but a replica left behind by an upgrade.
func (r *Checker) logNewer(s migrations.Schema) {
	if !s.Newer() || r.newerLogged.Swap(s.Version) == s.Version {
		return
	}
	r.logger.Warn("the database schema is newer than this binary knows; serving on it (migrations are expand-then-contract): upgrade this replica",
		slog.Int64("schema_version", s.Version), slog.Int64("binary_newest_migration", s.Newest))
}

// Ready returns the result of the last check: nil when the database
// answered and its schema had every migration of this binary (a newer
// schema included). A check under way for longer than
// Timeout (waiting for a database that does not answer, or connecting to
// it) is an error, and so is a result older than three intervals plus the
// check's timeouts, so a checker that stopped does not keep answering
// ready. It never touches the database; ctx is unused.
func (r *Checker) Ready(context.Context) error {
	if since := r.checking.Load(); since != 0 {
		if d := time.Since(time.Unix(0, since)); d > Timeout {
			return fmt.Errorf("readiness: the database has not answered the check for %s", d.Round(time.Second))
		}
	}
	last := r.last.Load()
	if age := time.Since(last.at); age > 3*r.interval+Timeout+ConnectTimeout {
		return fmt.Errorf("readiness: the last check is %s old", age.Round(time.Second))
	}
	return last.err
}

// Pool returns a check that pings pool and checks that its schema has
// every migration of this binary, on every call: the readiness of a server
// that runs no [Checker]. It returns nil when the database answered and
// its schema had every migration (a newer schema included, silently). Each call borrows a connection of pool through a
// database/sql handle of its own, closed before it returns (closing it
// leaves pool open), so a check that is dropped leaves no goroutine behind.
func Pool(pool *pgxpool.Pool) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := pool.Ping(ctx); err != nil {
			return err
		}
		db := stdlib.OpenDBFromPool(pool)
		defer db.Close()
		_, err := migrations.CheckDB(ctx, db)
		return err
	}
}
