// Package pgtest gives tests their own real PostgreSQL database.
//
// Server selection: if SEARCHD_TEST_DATABASE_URL (else DATABASE_URL) is set,
// that server is used through an admin connection able to CREATE DATABASE.
// Otherwise the first NewDB or NewDBURL call of a test binary starts a
// throwaway cluster: initdb into a fresh temporary directory, then postgres
// listening only on a unix socket in that directory, running as the user
// postgres (or nobody) when the tests run as root. The binaries are looked
// up in $SEARCHD_PG_BIN, `pg_config --bindir`, /usr/lib/postgresql/*/bin and
// $PATH, in that order. The postgres process carries a parent-death signal,
// so it cannot outlive the test binary even if that is SIGKILLed.
//
// Isolation: once per test binary, the harness makes sure a template
// database searchd_tmpl_<hash of migrations.FS> exists, migrated with
// migrations.Up; builds are serialised across processes with an advisory
// lock and published by renaming, so a half-built template is never used.
// Each NewDB clones it into a new database that is dropped at cleanup.
//
// Use Main from TestMain so the throwaway cluster is stopped cleanly:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Without it the cluster is still killed when the test binary exits, but
// its temporary directory is only removed by a later run.
//
// A package whose code starts goroutines uses MainNoLeaks instead, which
// also fails the binary when goroutines outlive the tests:
//
//	func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }
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

// shared is the tests' cluster; durable is the benchmarks' (see
// [NewDurableDBURL]), started only by a binary that asks for it.
var (
	shared  = &sharedServer{opts: Options{Citus: Citus(), ShardCount: citusTestShards}}
	durable = &sharedServer{opts: Options{Durable: true}}
)

// citusTestShards is the shard count of the tests' Citus cluster: two
// shards per worker, so a test's organizations land on both workers and
// on several shards of each, and a database clones quickly.
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

// NewDB returns a pool (MaxConns DefaultMaxConns) connected to a fresh,
// migrated database used by this test only. At cleanup the pool is closed
// and the database dropped. It is safe to call from parallel tests.
//
// NewDB never returns an error: any failure (no server or binaries, startup,
// migration or CREATE DATABASE failure) ends the test with t.Fatal, and a
// failure to drop the database at cleanup is reported with t.Error.
func NewDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return NewTracedDB(t, nil)
}

// NewTracedDB is [NewDB] whose connections carry tracer (a [StatementLog],
// a [Tracer], any pgx tracer) when it is not nil.
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

// NewDBURL is like NewDB but returns the connection string of the new
// database, for code that opens its own connections (a server under test,
// a benchmark). Connections still open at cleanup are terminated by the
// drop. Failures are reported as for NewDB.
func NewDBURL(t testing.TB) string {
	t.Helper()
	return newDBURL(t, shared)
}

// NewDurableDBURL is [NewDBURL] on a second throwaway cluster of this test
// binary that runs with fsync, synchronous_commit and full_page_writes on,
// as users run PostgreSQL: for benchmarks, whose figures must include what
// a commit costs. With EnvDatabaseURL set it is that server, whatever its
// settings; [DurableSettings] tells them.
func NewDurableDBURL(t testing.TB) string {
	t.Helper()
	return newDBURL(t, durable)
}

// DurableSettings returns the settings line ([Cluster.Settings]) of the
// server NewDurableDBURL uses, starting it on first use.
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

// createDB creates a database on s's cluster, starting it on first use;
// see [Cluster.CreateDB].
func (s *sharedServer) createDB() (string, func() error, error) {
	c, err := s.get()
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	return c.createDB(ctx)
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

// Server returns the admin connection string of the server used by this
// test binary, starting the throwaway cluster on first use. Tests that
// change server-wide state affect every other test. Failures end the test
// with t.Fatal.
func Server(t testing.TB) string {
	t.Helper()
	c, err := shared.get()
	if err != nil {
		t.Fatal(err)
	}
	return c.URL()
}

// Main runs the tests, stops the clusters of this test binary if any were
// started, and exits with the tests' status. Call it from TestMain. A
// failure to stop is printed to stderr but does not change the exit status.
func Main(m *testing.M) { os.Exit(run(m)) }

// MainNoLeaks is [Main] for a package whose code starts goroutines (a
// listener, a sweeper, an applier): once the tests passed and the clusters
// stopped, it fails the binary when a goroutine is still running, with the
// stacks of those left (go.uber.org/goleak; opts can ignore one known to
// outlive its test). A test that forgot to stop what it started, or code
// whose Stop or Close leaves a goroutine behind, then fails where it is
// written, not as a slow leak in a long-running process.
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
// clusters of this test binary.
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

// atExit holds what run releases after the tests; see AtExit.
var atExit struct {
	mu  sync.Mutex
	fns []func()
}

// AtExit registers f to run when [Main] or [MainNoLeaks] ends, after the
// tests and before the clusters stop, in the reverse order of
// registration: the cleanup of code that has no testing.TB, such as an
// Example function's server.
func AtExit(f func()) {
	atExit.mu.Lock()
	defer atExit.mu.Unlock()
	atExit.fns = append(atExit.fns, f)
}

// OpenDB is [NewDB] for code that has no testing.TB, such as an Example
// function: a pool (MaxConns DefaultMaxConns) on a fresh, migrated database
// of this test binary's cluster. The pool is closed and the database
// dropped when [Main] or [MainNoLeaks] ends, so only a binary whose
// TestMain calls one of them may use it. It returns the errors NewDB would
// end a test with.
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

// EnvCitus, set to 1, makes the harness's throwaway cluster a Citus
// cluster: a coordinator and two workers (`make test-citus`). Tests then
// run against the coordinator, on databases whose tables migration 00019
// distributed.
const EnvCitus = "SEARCHD_TEST_CITUS"

// Citus reports whether the tests of this binary run on a Citus cluster
// ([EnvCitus]).
func Citus() bool { return os.Getenv(EnvCitus) == "1" }
