package dbdeadline_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/dbdeadline"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

const timeout = 400 * time.Millisecond

// slack is how much later than its deadline a call may return on a busy
// machine: pgx closes the connection, which takes a moment.
const slack = 3 * time.Second

func pool(t *testing.T, url string, tr dbdeadline.Tracer, change func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.Tracer = tr
	if change != nil {
		change(pc)
	}
	p, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// within runs f and fails unless it returns an error the store boundary
// reads as transient (a 503), no sooner than the deadline and no later
// than slack after it. f's context has no deadline; a watchdog cancels it
// a second past the slack, so a call with no deadline of its own fails
// here, named, instead of hanging the test until its timeout.
func within(t *testing.T, what string, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watchdog := time.AfterFunc(timeout+slack+time.Second, cancel)
	start := time.Now()
	err := f(ctx)
	took := time.Since(start)
	switch {
	case !watchdog.Stop():
		t.Errorf("%s was still waiting %s after its %s deadline (%v): it has no deadline of its own", what, took-timeout, timeout, err)
	case err == nil:
		t.Errorf("%s succeeded, want it cut at its deadline", what)
	case !errors.Is(err, context.DeadlineExceeded) || !dberr.Transient(err):
		t.Errorf("%s = %v, want a transient deadline error", what, err)
	case took < timeout || took > timeout+slack:
		t.Errorf("%s failed after %s, want after its %s deadline", what, took, timeout)
	}
}

// TestEveryCallHasADeadlineOfItsOwn: a statement, a query's rows, a batch,
// a transaction's commit and a pool acquire that wait longer than the
// deadline fail at it, however long their caller's context lets them
// wait; calls within it succeed, and a caller's earlier deadline wins.
func TestEveryCallHasADeadlineOfItsOwn(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDBURL(t)
	p := pool(t, url, dbdeadline.Tracer{Timeout: timeout}, nil)
	ctx := context.Background()

	var one int
	if err := p.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	within(t, "Exec of pg_sleep(30)", func(ctx context.Context) error { _, err := p.Exec(ctx, "SELECT pg_sleep(30)"); return err })
	within(t, "Query of pg_sleep(30)", func(ctx context.Context) error {
		rows, err := p.Query(ctx, "SELECT pg_sleep(30)")
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	})
	within(t, "a batch with pg_sleep(30)", func(ctx context.Context) error {
		b := &pgx.Batch{}
		b.Queue("SELECT 1")
		b.Queue("SELECT pg_sleep(30)")
		return p.SendBatch(ctx, b).Close()
	})
	within(t, "a transaction's statement", func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "SELECT pg_sleep(30)")
			return err
		})
	})
	// Each call has its own deadline: three statements in one transaction
	// add up to more than one deadline. Each takes half its deadline, so a
	// loaded machine's delay (a 0.3 s statement once missed a 0.4 s
	// deadline at a load average of 25) still leaves it within.
	long := pool(t, url, dbdeadline.Tracer{Timeout: 3 * time.Second}, nil)
	if err := pgx.BeginFunc(ctx, long, func(tx pgx.Tx) error {
		for range 3 {
			if _, err := tx.Exec(ctx, "SELECT pg_sleep(1.5)"); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Errorf("three statements within their deadlines: %v", err)
	}
	// The caller's earlier deadline still wins.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := p.Exec(short, "SELECT pg_sleep(30)"); err == nil || time.Since(start) > timeout {
		t.Errorf("a call whose caller's deadline is 50 ms returned %v after %s", err, time.Since(start))
	}
	// A zero Timeout gives no deadline.
	none := pool(t, url, dbdeadline.Tracer{}, nil)
	if _, err := none.Exec(ctx, "SELECT pg_sleep(0.6)"); err != nil {
		t.Errorf("with no timeout, pg_sleep(0.6) = %v", err)
	}
}

// TestAcquireHasADeadline: with every connection of the pool held, an
// acquire fails at its deadline; so does one whose new connection reaches
// a server that accepts and never answers (a blackhole).
func TestAcquireHasADeadline(t *testing.T) {
	t.Parallel()
	p := pool(t, pgtest.NewDBURL(t), dbdeadline.Tracer{Timeout: timeout}, func(pc *pgxpool.Config) { pc.MaxConns = 1 })
	ctx := context.Background()
	held, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "an acquire from a full pool", func(ctx context.Context) error {
		c, err := p.Acquire(ctx)
		if err == nil {
			c.Release()
		}
		return err
	})
	held.Release()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // accepted, never answered
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	hole := pool(t, "postgres://u@"+ln.Addr().String()+"/db?sslmode=disable", dbdeadline.Tracer{Timeout: timeout}, nil)
	within(t, "an acquire whose connect is never answered", func(ctx context.Context) error {
		c, err := hole.Acquire(ctx)
		if err == nil {
			c.Release()
		}
		return err
	})
}
