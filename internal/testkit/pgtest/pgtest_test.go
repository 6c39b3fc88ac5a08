package pgtest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func currentDatabase(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) string {
	t.Helper()
	var name string
	if err := q.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestIsolation runs two parallel tests that each create a table in their
// own database, wait until both have done so, then check that they cannot
// see each other's table.
func TestIsolation(t *testing.T) {
	var ready sync.WaitGroup
	ready.Add(2)
	names := make(chan string, 2)
	for _, side := range []string{"a", "b"} {
		t.Run(side, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := pgtest.NewDB(t)
			_, err := db.Exec(ctx, "CREATE TABLE only_"+side+" (v int); INSERT INTO only_"+side+" VALUES (1)")
			ready.Done() // before any Fatal, so the other side never hangs
			if err != nil {
				t.Fatal(err)
			}
			name := currentDatabase(t, db)
			if !strings.HasPrefix(name, "searchd_test_") {
				t.Errorf("database %q lacks the searchd_test_ prefix", name)
			}
			names <- name

			waited := make(chan struct{})
			go func() { ready.Wait(); close(waited) }()
			select {
			case <-waited:
			case <-time.After(time.Minute):
				t.Fatal("the other parallel test never created its table (is -parallel 1?)")
			}

			other := map[string]string{"a": "b", "b": "a"}[side]
			var mine, theirs bool
			err = db.QueryRow(ctx, "SELECT to_regclass('only_'||$1) IS NOT NULL, to_regclass('only_'||$2) IS NOT NULL",
				side, other).Scan(&mine, &theirs)
			if err != nil {
				t.Fatal(err)
			}
			if !mine || theirs {
				t.Errorf("in %s: own table visible=%v, other test's table visible=%v; want true, false", name, mine, theirs)
			}
		})
	}
	t.Cleanup(func() {
		close(names)
		var got []string
		for n := range names {
			got = append(got, n)
		}
		if len(got) == 2 && got[0] == got[1] {
			t.Errorf("both parallel tests got database %s", got[0])
		}
	})
}

// TestTemplateMigrated checks that a new database already has the
// migrations applied.
func TestTemplateMigrated(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	var migrated bool
	err := db.QueryRow(context.Background(),
		"SELECT to_regclass('agent.idempotency_keys') IS NOT NULL").Scan(&migrated)
	if err != nil {
		t.Fatal(err)
	}
	if !migrated {
		t.Fatal("agent.idempotency_keys does not exist: migrations were not applied to the template")
	}
}

// TestTemplateClosed checks that the template exists under its final name
// and refuses connections, so nothing can block CREATE DATABASE ... TEMPLATE.
func TestTemplateClosed(t *testing.T) {
	t.Parallel()
	pgtest.NewDB(t) // makes sure the template exists
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Server(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_database
		WHERE datname ~ '^searchd_tmpl_[0-9a-f]{12}$' AND NOT datallowconn`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no closed searchd_tmpl_<hash> database on the server")
	}
}

// TestDroppedAtCleanup checks that the database of a finished test is gone,
// even though that test left a connection open.
func TestDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var name string
	t.Run("user", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, pgtest.NewDBURL(t))
		if err != nil {
			t.Fatal(err)
		}
		// Deliberately not closed: the drop must terminate it.
		name = currentDatabase(t, conn)
	})
	if name == "" {
		t.Fatal("subtest did not get a database")
	}
	admin, err := pgx.Connect(ctx, pgtest.Server(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var exists bool
	err = admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s still exists after its test finished", name)
	}
}

// TestManyParallel creates many databases at once.
func TestManyParallel(t *testing.T) {
	for i := range 16 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			db := pgtest.NewDB(t)
			if got := db.Config().MaxConns; got != pgtest.DefaultMaxConns {
				t.Errorf("MaxConns = %d, want %d", got, pgtest.DefaultMaxConns)
			}
			if _, err := db.Exec(context.Background(), "CREATE TABLE t (v int)"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStart exercises the non-test entry point: a Cluster of its own
// (a second throwaway cluster unless an external server is configured).
func TestStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgtest.StartWith(ctx, pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()
	dbURL, drop, err := c.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	var migrated bool
	err = conn.QueryRow(ctx, "SELECT to_regclass('agent.idempotency_keys') IS NOT NULL").Scan(&migrated)
	conn.Close(ctx)
	if err != nil || !migrated {
		t.Fatalf("migrated=%v err=%v", migrated, err)
	}
	drop()
	drop() // idempotent
	if conn, err := pgx.Connect(ctx, dbURL); err == nil {
		conn.Close(ctx)
		t.Error("connected to a dropped database")
	}

	adminURL := c.URL()
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if !c.External() {
		shortCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(shortCtx, adminURL); err == nil {
			conn.Close(ctx)
			t.Error("throwaway cluster still accepts connections after Stop")
		}
	}
}
