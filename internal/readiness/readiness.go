// Package readiness answers whether searchd can take traffic: the
// database answers and the schema has every migration of this binary. A
// newer schema (a rolling upgrade) is ready too: migrations are
// expand-then-contract.
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

// ConnectTimeout bounds making the checker's connection, apart from the
// check's Timeout: on a busy machine connecting can take longer than a
// check may, and a checker that gave up would stay not ready while the
// database serves. Ready still reports not ready once a check, connecting
// included, has run past Timeout.
const ConnectTimeout = 15 * time.Second

var errNotCheckedYet = errors.New("readiness: not checked yet")

// Checker checks readiness in the background, every interval, on one
// connection of its own, and answers from the last result: a probe costs
// no round trip, and a pool held by slow requests does not make readiness
// flap. It is safe for concurrent use.
type Checker struct {
	db       *sql.DB
	interval time.Duration
	last     atomic.Pointer[readyResult]
	checking atomic.Int64 // start of the check under way, Unix ns; 0 if none
	logger   *slog.Logger
	// newerLogged is the newer schema version last logged.
	newerLogged atomic.Int64
}

type readyResult struct {
	err error
	at  time.Time
}

// NewChecker returns a checker that connects with a copy of cfg and checks
// every interval (zero is [DefaultInterval]). It logs to logger (nil:
// nowhere) once per version when the schema is newer than this binary. It
// connects only when it checks.
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

// Run checks every interval until ctx ends, then closes its connection.
func (r *Checker) Run(ctx context.Context) {
	defer r.db.Close()
	loop.Loop{}.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		r.Check(ctx)
		return loop.Next{Wait: r.interval}, nil
	})
}

// Check checks once and keeps the result for [Checker.Ready]; a server
// checks before it serves, so it is ready from its first probe.
func (r *Checker) Check(ctx context.Context) {
	r.checking.Store(time.Now().UnixNano())
	defer r.checking.Store(0)
	// Connect first, under its own timeout; the check reuses the idle
	// connection.
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
// binary.
func (r *Checker) logNewer(s migrations.Schema) {
	if !s.Newer() || r.newerLogged.Swap(s.Version) == s.Version {
		return
	}
	r.logger.Warn("the database schema is newer than this binary knows; serving on it (migrations are expand-then-contract): upgrade this replica",
		slog.Int64("schema_version", s.Version), slog.Int64("binary_newest_migration", s.Newest))
}

// Ready returns the result of the last check: nil when the database
// answered and its schema was current or newer. A check under way for
// longer than Timeout is an error, and so is a result too old (a checker
// that stopped). It never touches the database.
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

// Pool returns a readiness check that pings pool and checks its schema on
// every call, for a server that runs no [Checker]. Closing the
// database/sql handle it opens per call leaves pool open.
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
