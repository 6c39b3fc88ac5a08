package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/readiness"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/migrations"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

var errNotCurrent = errors.New("the database named by -database-url is not at the newest migration; run `searchd migrate` first")

// setupTimeout bounds starting the cluster, creating and seeding the
// database and starting both servers.
const setupTimeout = 3 * time.Minute

// The HTTP server timeouts of cmd/searchd/serve.go.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
)

// benchActor is the token's sub, recorded on snapshots and Runs; the thin
// handler records the same.
const benchActor = "bench"

// env is the database and the two servers under load.
type env struct {
	real, thin    *target
	dbDescription string
	pgVersion     string
	pgSettings    string
	maxConns      int32
	// limits is every limit the real server runs with, for the header.
	limits string
	pg     pgCPU
	org    uuid.UUID
	// queue counts the real server's waits for a seat.
	queue *queueWatch
	// searches are org's saved searches, which the starts pick from.
	searches []uuid.UUID
	// admin runs the benchmark's own statements, outside both counted
	// pools.
	admin   *pgxpool.Pool
	closers []func()
}

// analyze refreshes the statistics of the tables a start reads and writes.
//
// Without it the cached generic plans of a measure depend on when each
// connection made them. A plan made while agent.runs has no statistics
// (autovacuum looks at a table once a minute, and a round is seconds)
// estimates one row for any index on organization_id, and may then pick
// runs_org_id_key (organization_id, id) over runs_org_start_key_key for
// the start-key lookup: a scan of the organization's every Run per replay,
// kept until the next ANALYZE. Which connections got such a plan decided
// the replay ratio (0.10× to 1.0× between runs) before this was added.
// ANALYZE invalidates every cached plan on the tables, so both handlers
// plan afresh on the same statistics.
func (e *env) analyze(ctx context.Context) error {
	_, err := e.admin.Exec(ctx, `ANALYZE agent.runs, agent.saved_search_snapshots, agent.idempotency_keys,
		agent.saved_searches, agent.saved_search_baselines`)
	if err != nil {
		return fmt.Errorf("analyzing: %w", err)
	}
	return nil
}

// replayPlan returns the generic plan PostgreSQL makes, on the current
// statistics, for a replay's one statement: the plan each pooled
// connection switches to after five executions (see analyze). Its first
// lines name the index the lookup uses.
func (e *env) replayPlan(ctx context.Context) (string, error) {
	conn, err := e.admin.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	c := conn.Conn()
	// A session of its own, left as it was: the prepared statement and the
	// setting go with the deallocate and reset.
	if _, err := c.Exec(ctx, `PREPARE bench_replay_plan(uuid, text, timestamptz) AS `+thinRunWithSnapshotByStartKey); err != nil {
		return "", fmt.Errorf("preparing the replay's statement: %w", err)
	}
	defer func() {
		_, _ = c.Exec(context.WithoutCancel(ctx), `DEALLOCATE bench_replay_plan; RESET plan_cache_mode`)
	}()
	if _, err := c.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		return "", err
	}
	// EXPLAIN takes no parameters; a uuid's text is safe to inline.
	rows, err := c.Query(ctx, `EXPLAIN (COSTS OFF) EXECUTE bench_replay_plan('`+e.org.String()+`', 'none', NULL)`)
	if err != nil {
		return "", fmt.Errorf("explaining the replay's statement: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("explaining the replay's statement: %w", err)
	}
	var scans []string
	for _, l := range lines {
		if t := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "->")); strings.Contains(t, "Scan") {
			scans = append(scans, strings.TrimSpace(t))
		}
	}
	return strings.Join(scans, "; "), nil
}

// checkRows checks that every admitted start, on either handler, left
// exactly one Run, one snapshot and one completed claim: the two handlers
// did the same writes.
func (e *env) checkRows(ctx context.Context, starts int) error {
	var runs, snapshots, claims int
	err := e.admin.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM agent.runs WHERE organization_id = $1),
		(SELECT count(*) FROM agent.saved_search_snapshots WHERE organization_id = $1),
		(SELECT count(*) FROM agent.idempotency_keys WHERE organization_id = $1 AND status = 'completed')`,
		e.org).Scan(&runs, &snapshots, &claims)
	if err != nil {
		return fmt.Errorf("counting the rows the starts wrote: %w", err)
	}
	if runs != starts || snapshots != starts || claims != starts {
		return fmt.Errorf("%d starts admitted, but the database holds %d Runs, %d snapshots and %d completed claims",
			starts, runs, snapshots, claims)
	}
	return nil
}

// close stops the servers and releases the database, last opened first.
func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

func setUp(ctx context.Context, cfg config) (_ *env, err error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	e := &env{}
	defer func() {
		if err != nil {
			e.close()
		}
	}()

	dbURL := cfg.databaseURL
	if dbURL != "" {
		switch _, err := migrations.Check(ctx, dbURL); {
		case errors.Is(err, migrations.ErrNotCurrent):
			return nil, fmt.Errorf("%w: %w", errNotCurrent, err)
		case err != nil:
			return nil, fmt.Errorf("checking the database named by -database-url: %w", err)
		}
		e.dbDescription = "the database named by -database-url"
	} else {
		// Durable, as users run PostgreSQL: every commit waits for its
		// WAL flush, which is most of what a new start costs.
		cluster, err := pgtest.StartWith(ctx, pgtest.Options{Durable: true})
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, func() { _ = cluster.Stop() })
		url, drop, err := cluster.CreateDB(ctx)
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, func() { _ = drop() })
		dbURL = url
		if cluster.External() {
			e.dbDescription = "a fresh database on the server named by SEARCHD_TEST_DATABASE_URL or DATABASE_URL"
		} else {
			e.dbDescription = "a fresh database on a durable throwaway cluster (internal/testkit/pgtest), over a unix socket"
		}
	}

	org := uuid.New()
	e.org = org
	searches, err := seed(ctx, e, dbURL, org, cfg)
	if err != nil {
		return nil, err
	}
	e.searches = searches

	secret := make([]byte, auth.MinSecretLen)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	token, err := auth.SignToken(secret, org, benchActor, time.Now(), time.Hour)
	if err != nil {
		return nil, err
	}
	bearer := "Bearer " + token

	// The real server, assembled as cmd/searchd's newAPI assembles it.
	realPool, realTrace, err := openPool(ctx, e, dbURL, cfg.maxConns)
	if err != nil {
		return nil, err
	}
	e.maxConns = realPool.Config().MaxConns
	logger := slog.New(slog.DiscardHandler)
	switch cfg.accessLog {
	case "json":
		logger = slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	case "stderr":
		logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	// Each store once, shared by the starter and the API, as cmd/searchd
	// wires them.
	plane := idempotency.NewService(realPool, idempotency.Config{})
	searchStore, snapStore := savedsearch.NewStore(realPool), snapshot.NewStore(realPool)
	runStore := runs.NewStore(realPool, runs.Config{})
	starter, err := admission.NewStarter(admission.Deps{
		Pool: realPool, Plane: plane, SavedSearches: searchStore, Snapshots: snapStore, Runs: runStore,
	}, admission.Config{})
	if err != nil {
		return nil, err
	}
	// The seat queue at its defaults, its seats the pool's size, as
	// searchd serve builds it (cmd/searchd's newAdmission).
	e.queue = &queueWatch{}
	queue, err := seatq.New(seatq.Config{Seats: int(e.maxConns), Observer: e.queue})
	if err != nil {
		return nil, err
	}
	e.limits = fmt.Sprintf("seats %d (the pool's size), queue length %d per organization, max wait %s; "+
		"body limit %d bytes; session bounds %s; %s",
		queue.Seats(), queue.QueueLength(), queue.MaxWait(), api.DefaultMaxBodyBytes, sessionBoundsText,
		map[bool]string{true: "searchd serve's defaults but for the pool size -max-conns set (the seats follow it)",
			false: "all at searchd serve's defaults, nothing raised or disabled"}[cfg.maxConns > 0])
	verifier, err := auth.NewVerifier(context.Background(), auth.Config{Secret: secret})
	if err != nil {
		return nil, err
	}
	srv, err := api.New(api.Deps{
		Ready:         readiness.Pool(realPool),
		Plane:         plane,
		SavedSearches: searchStore,
		Snapshots:     snapStore,
		Runs:          runStore,
		Starter:       starter,
		ProviderJobs:  providerjobs.New(realPool, plane, providerjobs.Config{}),
		Dispatches:    dispatch.NewStore(realPool, nil),
		Verifier:      verifier,
		Logger:        logger,
		Seats:         queue,
	})
	if err != nil {
		return nil, err
	}
	realBase, err := listen(e, srv.Handler())
	if err != nil {
		return nil, err
	}
	e.real = newTarget("real", realBase, cfg.clients, realPool, realTrace, e.pg, bearer, searches)

	thinPool, thinTrace, err := openPool(ctx, e, dbURL, cfg.maxConns)
	if err != nil {
		return nil, err
	}
	thinBase, err := listen(e, (&thin{pool: thinPool, org: org, actor: benchActor}).handler())
	if err != nil {
		return nil, err
	}
	e.thin = newTarget("thin", thinBase, cfg.clients, thinPool, thinTrace, e.pg, bearer, searches)
	return e, nil
}

// serveMaxConns is searchd serve's default pool size (cmd/searchd's
// DefaultDBMaxConns).
const serveMaxConns = 16

// serveSessionBounds are the server-side bounds searchd serve sets on
// every session at its defaults (cmd/searchd's inboxsettings.go), in
// milliseconds.
var serveSessionBounds = map[string]string{
	"idle_in_transaction_session_timeout": "5000",
	"lock_timeout":                        "10000",
	"statement_timeout":                   "15000",
}

const sessionBoundsText = "idle_in_transaction_session_timeout 5s, lock_timeout 10s, statement_timeout 15s"

// openPool opens a pool on dbURL configured as searchd serve configures it
// at its defaults (its pool size and session bounds; MaxConns overridden
// when maxConns > 0), with a statement counter. Both servers get the same.
func openPool(ctx context.Context, e *env, dbURL string, maxConns int) (*pgxpool.Pool, *sqlTrace, error) {
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	pcfg.MaxConns = serveMaxConns
	if maxConns > 0 {
		pcfg.MaxConns = int32(maxConns)
	}
	for k, v := range serveSessionBounds {
		pcfg.ConnConfig.RuntimeParams[k] = v
	}
	trace := &sqlTrace{}
	pcfg.ConnConfig.Tracer = phaseTracer{trace}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("opening a pool: %w", err)
	}
	e.closers = append(e.closers, pool.Close)
	if err := pool.Ping(ctx); err != nil {
		return nil, nil, fmt.Errorf("connecting: %w", err)
	}
	return pool, trace, nil
}

// listen serves h on a fresh 127.0.0.1 port with searchd serve's timeouts
// and returns its base URL.
func listen(e *env, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{
		Handler:           timed(h), // both servers alike: see phases.go
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
	}
	go func() { _ = srv.Serve(ln) }()
	e.closers = append(e.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
	})
	return "http://" + ln.Addr().String(), nil
}

// seed opens e.admin, reads the server's version and settings, and creates
// cfg.savedSearches saved searches of org through the real store.
func seed(ctx context.Context, e *env, dbURL string, org uuid.UUID, cfg config) ([]uuid.UUID, error) {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("opening a pool: %w", err)
	}
	e.admin = pool
	e.closers = append(e.closers, pool.Close)
	var fsync, syncCommit, fpw, sharedBuffers, maxConnections string
	var backend int
	err = pool.QueryRow(ctx, `SELECT version(), current_setting('fsync'), current_setting('synchronous_commit'),
		current_setting('full_page_writes'), current_setting('shared_buffers'), current_setting('max_connections'),
		pg_backend_pid()`).
		Scan(&e.pgVersion, &fsync, &syncCommit, &fpw, &sharedBuffers, &maxConnections, &backend)
	if err != nil {
		return nil, fmt.Errorf("reading the server's settings: %w", err)
	}
	e.pg = newPGCPU(backend)
	e.pgSettings = fmt.Sprintf("fsync=%s synchronous_commit=%s full_page_writes=%s shared_buffers=%s max_connections=%s",
		fsync, syncCommit, fpw, sharedBuffers, maxConnections)

	store := savedsearch.NewStore(pool)
	ids := make([]uuid.UUID, cfg.savedSearches)
	for i := range ids {
		items := make([]string, cfg.baselineItems)
		for j := range items {
			items[j] = fmt.Sprintf("https://example.com/results/%d/%d", i, j)
		}
		ss, err := store.Create(ctx, org, savedsearch.CreateParams{
			Name: fmt.Sprintf("bench saved search %d", i),
			Brief: savedsearch.Brief{
				Query:   fmt.Sprintf("laptops under 1000 euros, batch %d", i),
				Filters: map[string]any{"lang": "en", "max_age_days": 30},
			},
			Baseline: savedsearch.Baseline{Items: items},
			Actor:    benchActor,
		})
		if err != nil {
			return nil, fmt.Errorf("seeding saved search %d: %w", i, err)
		}
		ids[i] = ss.ID
	}
	return ids, nil
}
