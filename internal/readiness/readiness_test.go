package readiness

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/migrations"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

// TestACheckerOfACurrentDatabaseIsReady: a check of a migrated database
// that answers makes the checker ready.
func TestACheckerOfACurrentDatabaseIsReady(t *testing.T) {
	t.Parallel()
	cfg, err := pgx.ParseConfig(pgtest.NewDBURL(t))
	if err != nil {
		t.Fatal(err)
	}
	r := NewChecker(cfg, time.Hour, nil)
	defer r.db.Close()
	if err := r.Ready(context.Background()); err == nil {
		t.Error("Ready before any check = nil, want not checked yet")
	}
	r.Check(context.Background())
	if err := r.Ready(context.Background()); err != nil {
		t.Errorf("Ready after a check of a current database = %v, want nil", err)
	}
}

// TestACheckThatHangsReadsNotReadyAfterTheTimeout: the last check found
// the database ready, and the next one waits on a database that accepts
// connections and never answers (a blackholed primary): Ready keeps the
// last result for the check's Timeout and then says not ready, while the
// check still waits (it may wait ConnectTimeout to connect).
func TestACheckThatHangsReadsNotReadyAfterTheTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		held []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // accepted, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	cfg, err := pgx.ParseConfig("postgres://searchd@" + ln.Addr().String() + "/searchd?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	r := NewChecker(cfg, time.Hour, nil)
	defer r.db.Close()
	r.last.Store(&readyResult{at: time.Now()}) // the last check: ready

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		r.Check(ctx)
	}()
	if err := r.Ready(ctx); err != nil && time.Since(start) < Timeout {
		t.Errorf("Ready at once = %v, want the last result (ready) for the check's timeout", err)
	}
	var notReady error
	for notReady == nil && time.Since(start) < Timeout+3*time.Second {
		time.Sleep(50 * time.Millisecond)
		notReady = r.Ready(ctx)
	}
	took := time.Since(start)
	select {
	case <-done:
		t.Fatalf("the check ended after %s; want it still waiting on the database that does not answer", took)
	default:
	}
	switch {
	case notReady == nil:
		t.Errorf("Ready still nil %s into a check that hangs, want not ready after the check's %s timeout", took, Timeout)
	case took < Timeout:
		t.Errorf("not ready after %s (%v), want the last result kept for the check's %s timeout", took, notReady, Timeout)
	}
	cancel()
	<-done
	if err := r.Ready(context.Background()); err == nil {
		t.Error("Ready after the check failed = nil, want its error")
	}
}

// schemaAt opens a migrated database, runs sql on it (to move its schema
// version) and returns a checker of it that logs to log.
func schemaAt(t *testing.T, log *pgtest.SyncBuffer, sql string) (*Checker, *pgxpool.Pool) {
	t.Helper()
	url := pgtest.NewDBURL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	r := NewChecker(cfg, time.Hour, slog.New(slog.NewTextHandler(log, nil)))
	t.Cleanup(func() { r.db.Close() })
	return r, pool
}

// TestACheckerOfANewerSchemaIsReadyAndSaysSoOnce: a database a newer
// release migrated (a goose version beyond this binary's, applied by a
// migration it does not know) keeps the replica ready, and the checker
// logs it once however often it checks.
func TestACheckerOfANewerSchemaIsReadyAndSaysSoOnce(t *testing.T) {
	t.Parallel()
	var log pgtest.SyncBuffer
	r, pool := schemaAt(t, &log, `
		CREATE TABLE agent.e2e_from_a_newer_release (id bigint PRIMARY KEY);
		INSERT INTO public.goose_db_version (version_id, is_applied)
		SELECT max(version_id) + 1, true FROM public.goose_db_version`)
	for range 3 {
		r.Check(context.Background())
		if err := r.Ready(context.Background()); err != nil {
			t.Fatalf("Ready on a newer schema = %v, want nil", err)
		}
	}
	if n := strings.Count(log.String(), "schema is newer than this binary"); n != 1 {
		t.Errorf("after 3 checks of a newer schema the log says it %d times, want once:\n%s", n, log.String())
	}
	if err := Pool(pool)(context.Background()); err != nil {
		t.Errorf("Pool on a newer schema = %v, want nil", err)
	}
}

// TestACheckerOfAnOlderSchemaIsNotReady: a database that lacks the
// binary's newest migration is not ready, and nothing says it is newer.
func TestACheckerOfAnOlderSchemaIsNotReady(t *testing.T) {
	t.Parallel()
	var log pgtest.SyncBuffer
	r, pool := schemaAt(t, &log, `DELETE FROM public.goose_db_version
		WHERE version_id = (SELECT max(version_id) FROM public.goose_db_version)`)
	r.Check(context.Background())
	if err := r.Ready(context.Background()); !errors.Is(err, migrations.ErrNotCurrent) {
		t.Errorf("Ready on an older schema = %v, want ErrNotCurrent", err)
	}
	if err := Pool(pool)(context.Background()); !errors.Is(err, migrations.ErrNotCurrent) {
		t.Errorf("Pool on an older schema = %v, want ErrNotCurrent", err)
	}
	if strings.Contains(log.String(), "newer") {
		t.Errorf("the log of an older schema says newer:\n%s", log.String())
	}
}
