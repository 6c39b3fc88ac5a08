// Package pgtest gives each test its own real PostgreSQL database.
//
// If SEARCHD_TEST_DATABASE_URL (else DATABASE_URL) is set, that server is
// used through an admin connection. Otherwise the first NewDB starts a
// throwaway cluster on a unix socket in a temporary directory (as postgres
// or nobody when run as root), with binaries from $SEARCHD_PG_BIN,
// `pg_config --bindir`, /usr/lib/postgresql/*/bin or $PATH. It dies with
// the test binary, even a SIGKILLed one.
//
// A template database, named by a hash of migrations.FS, is built and
// migrated once (under an advisory lock, published by rename); each NewDB
// clones it and drops the clone at cleanup.
//
// Call Main, or MainNoLeaks for packages that start goroutines, from
// TestMain so the cluster stops cleanly:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
package pgtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
)

// DefaultMaxConns is the MaxConns of pools returned by NewDB.
const DefaultMaxConns = 32

// setupTimeout bounds starting the cluster, building the template and
// creating one database.
const setupTimeout = 3 * time.Minute

// sharedServer is a cluster of this test binary, started on first use.
type sharedServer struct {
	mu      sync.Mutex
	opts    Options
	cluster *Cluster
	err     error // sticky: every test fails with the same start error
}

// shared is the tests' cluster; durable the benchmarks' (see
// [NewDurableDBURL]), started only on demand.
var (
	shared  = &sharedServer{opts: Options{Citus: Citus(), ShardCount: citusTestShards}}
	durable = &sharedServer{opts: Options{Durable: true}}
)

// citusTestShards is the tests' Citus shard count: two per worker, so
// organizations spread while databases clone quickly.
const citusTestShards = 4

func (s *sharedServer) get() (*Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cluster == nil && s.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		s.cluster, s.err = StartWith(ctx, s.opts)
	}
	return s.cluster, s.err
}

func (s *sharedServer) stop() {
	s.mu.Lock()
	c := s.cluster
	s.mu.Unlock()
	if c != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}

// NewDB returns a pool (MaxConns DefaultMaxConns) on a fresh migrated
// database for this test only, closed and dropped at cleanup. It is safe
// for parallel tests. Failures end the test with t.Fatal; a failed drop is
// reported with t.Error.
func NewDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return NewTracedDB(t, nil)
}

// NewTracedDB is [NewDB] with tracer on its connections, if not nil.
func NewTracedDB(t testing.TB, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	dbURL := NewDBURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	pool, err := openPool(ctx, dbURL, DefaultMaxConns, tracer)
	if err != nil {
		t.Fatalf("pgtest: connecting to test database: %v", err)
	}
	// Registered after NewDBURL's cleanup, so it runs before the drop.
	t.Cleanup(pool.Close)
	return pool
}

// NewDBURL is NewDB returning the new database's URL, for code that opens
// its own connections; those still open are terminated by the drop.
func NewDBURL(t testing.TB) string {
	t.Helper()
	return newDBURL(t, shared)
}

// NewDurableDBURL is [NewDBURL] on a second cluster with fsync,
// synchronous_commit and full_page_writes on, for benchmarks. With
// EnvDatabaseURL set it is that server; [DurableSettings] tells its
// settings.
func NewDurableDBURL(t testing.TB) string {
	t.Helper()
	return newDBURL(t, durable)
}

// DurableSettings returns [Cluster.Settings] of NewDurableDBURL's server.
func DurableSettings(t testing.TB) string {
	t.Helper()
	c, err := durable.get()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	s, err := c.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// createDB creates a database on s's cluster, starting it on first use.
func (s *sharedServer) createDB() (string, func() error, error) {
	c, err := s.get()
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	return c.CreateDB(ctx)
}

func newDBURL(t testing.TB, s *sharedServer) string {
	t.Helper()
	dbURL, drop, err := s.createDB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	})
	return dbURL
}

// Server returns the admin URL of this binary's server, starting it on
// first use. Changing server-wide state affects every test.
func Server(t testing.TB) string {
	t.Helper()
	c, err := shared.get()
	if err != nil {
		t.Fatal(err)
	}
	return c.URL()
}

// Main runs the tests, stops this binary's clusters and exits with the
// tests' status. A failure to stop is printed but does not change it.
func Main(m *testing.M) { os.Exit(run(m)) }

// MainNoLeaks is [Main] that also fails the binary when goroutines outlive
// the tests (go.uber.org/goleak; opts can ignore known ones).
func MainNoLeaks(m *testing.M, opts ...goleak.Option) {
	code := run(m)
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: goroutines still running after the tests passed: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// run runs the tests, releases what [OpenDB] handed out, and stops the
// clusters.
func run(m *testing.M) int {
	code := m.Run()
	atExit.mu.Lock()
	fns := atExit.fns
	atExit.fns = nil
	atExit.mu.Unlock()
	for _, f := range slices.Backward(fns) {
		f()
	}
	shared.stop()
	durable.stop()
	return code
}

var atExit struct {
	mu  sync.Mutex
	fns []func()
}

// AtExit registers f to run after the tests, before the clusters stop, in
// reverse order: cleanup for code without a testing.TB, such as Examples.
func AtExit(f func()) {
	atExit.mu.Lock()
	defer atExit.mu.Unlock()
	atExit.fns = append(atExit.fns, f)
}

// OpenDB is [NewDB] for code without a testing.TB, such as Examples. The
// pool is closed and the database dropped when [Main] or [MainNoLeaks]
// ends, so only binaries whose TestMain calls one may use it.
func OpenDB() (*pgxpool.Pool, error) {
	dbURL, drop, err := shared.createDB()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	pool, err := openPool(ctx, dbURL, DefaultMaxConns, nil)
	if err != nil {
		_ = drop()
		return nil, fmt.Errorf("pgtest: opening pool: %w", err)
	}
	AtExit(func() { pool.Close(); _ = drop() })
	return pool, nil
}

// EnvCitus set to 1 makes the throwaway cluster a Citus cluster
// (`make test-citus`).
const EnvCitus = "SEARCHD_TEST_CITUS"

// Citus reports whether the tests run on a Citus cluster ([EnvCitus]).
func Citus() bool { return os.Getenv(EnvCitus) == "1" }
