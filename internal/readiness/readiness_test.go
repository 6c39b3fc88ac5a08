package readiness

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/pgtest"
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
	r := NewChecker(cfg, time.Hour)
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
	r := NewChecker(cfg, time.Hour)
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
