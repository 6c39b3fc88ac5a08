package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/dberr"
)

// openPool opens the database pool of serve and dev, sized by
// cfg.DBMaxConns when it is set. Each prepare edits the config before the
// pool opens (observability.openPool sets the tracer).
func openPool(ctx context.Context, cfg serverConfig, prepare ...func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	pc, err := poolConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.DBMaxConns > 0:
		pc.MaxConns = cfg.DBMaxConns
	case !strings.Contains(cfg.DatabaseURL, "pool_max_conns"):
		pc.MaxConns = defaultDBMaxConns // see its comment: commits, not CPUs
	}
	pc.MinConns = min(pc.MinConns, pc.MaxConns)
	// Server-side bounds on every session (why: at their defaults).
	maps.Copy(pc.ConnConfig.RuntimeParams, cfg.Session.runtimeParams())
	for _, p := range prepare {
		p(pc)
	}
	// Client-side bounds (dbwait.go), after prepare so that the deadline
	// tracer joins the tracer prepare set.
	applyAnswerTimeout(pc, cfg.DBAnswerTimeout)
	return pgxpool.NewWithConfig(ctx, pc)
}

// poolConfig parses the connection string of every pool, whose pool drops
// a connection whose server refused a write as read-only (SQLSTATE 25006):
// the pool reached a primary that was demoted, or a standby, and every
// later write on that connection would fail alike. The request answers 503
// and the next acquire connects afresh, which with a multi-host URL and
// target_session_attrs=read-write reaches the new primary. (A pool keeps a
// connection that answers errors, and only this hook sees the error on its
// connection.)
func poolConfig(dbURL string) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		// Validated already; the message may quote a password.
		return nil, fmt.Errorf("%s is not a valid PostgreSQL connection string", envDatabaseURL)
	}
	pc.ConnConfig.OnPgError = dberr.ClosingOnPgError(pc.ConnConfig.OnPgError)
	return pc, nil
}

// startHub starts the claim listener that wakes starts waiting on
// Prefer: wait, and returns it with the function that stops it. With
// waiting off (cfg.MaxPreferWait zero) there is no hub, and no connection
// spent on one.
//
// The hub outlives ctx, the signal: while the server drains, requests
// still waiting need it. The caller stops it once the server has stopped.
func startHub(ctx context.Context, pool *pgxpool.Pool, cfg serverConfig, logger *slog.Logger) (*idempotency.Hub, func()) {
	if cfg.MaxPreferWait <= 0 {
		return nil, func() {}
	}
	hub := idempotency.NewHub(pool.Config().ConnConfig, logger)
	return hub, background(context.WithoutCancel(ctx), func(ctx context.Context) {
		_ = hub.Run(ctx) // returns ctx's error: we stopped it
	})
}

// background runs run in a goroutine on a context of its own, derived
// from ctx, and returns the function that cancels that context and waits
// for run to return.
func background(ctx context.Context, run func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// cancelTimeout is how long requests cancelled at the end of the grace
// get to return. A cancelled start releases its claim on a context of its
// own, bounded by admission's release timeout (5 s); this adds a margin.
const cancelTimeout = 10 * time.Second

// serveHTTP serves h on ln until ctx ends, then shuts down:
//
//  1. it stops accepting and lets the requests in flight finish, for up
//     to the grace;
//  2. it cancels the requests still running after that. A start cut off
//     inside its freeze then releases its claim (on a context detached
//     from the request's) and answers 503 with Retry-After, so a retry
//     runs at once instead of meeting a claim left processing until its
//     lease passes; a start waiting on Prefer: wait answers 409;
//  3. it waits up to cancelTimeout for them to return and their answers
//     to be written, then closes every connection.
//
// Requests run on a base context of their own rather than ctx, so that
// the signal does not cancel them before their grace. A request header
// over maxHeaderBytes (http.Server.MaxHeaderBytes) is answered 431 and its
// connection closed, Go having read at most 4 KiB past it. It returns an
// error when serving fails or when requests had to be cancelled.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, maxHeaderBytes int, logger *slog.Logger) error {
	base, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	var running atomic.Int64 // the requests being served, for the log
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			running.Add(1)
			defer running.Add(-1)
			h.ServeHTTP(w, r)
		}),
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down; draining requests in flight", slog.Duration("grace", grace))
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-served // http.ErrServerClosed, now that Shutdown has begun
	if err == nil {
		logger.Info("stopped")
		return nil
	}

	n := running.Load()
	logger.Warn("grace over; cancelling the requests still running", slog.Int64("requests", n))
	cancelRequests()
	// Shutdown again: it returns once every cancelled request has returned
	// and its answer is written (the connection then closes), which a
	// count of running handlers alone would not know.
	wctx, wcancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer wcancel()
	ended := srv.Shutdown(wctx) == nil
	_ = srv.Close()
	if !ended {
		return fmt.Errorf("requests still running after the %s grace were cut off; %d did not end within %s of being cancelled",
			grace, running.Load(), cancelTimeout)
	}
	return fmt.Errorf("requests still running after the %s grace were cut off: %d cancelled, and each answered", grace, n)
}
