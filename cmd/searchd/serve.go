package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/migrations"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

// startupTimeout bounds the database checks before serving.
const startupTimeout = 30 * time.Second

// HTTP server timeouts: generous for a JSON API with 8 MiB bodies, finite
// so a slow or idle client cannot hold a connection for ever.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
)

func (a *app) serve(ctx context.Context, args []string) error {
	fs := a.flagSet("serve")
	serverFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadServerConfig(fs, a.getenv, false)
	if err != nil {
		return err
	}
	logger := newLogger(a.stderr, cfg)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err := checkSchema(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("opening the database pool: %w", err)
	}
	defer pool.Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("%s=%s: cannot listen: %w", EnvAddr, cfg.Addr, err)
	}
	return a.runServer(ctx, cfg, ln, pool, logger)
}

// checkSchema refuses a database whose schema is not at the newest
// migration: serving an older schema would fail requests one by one.
func checkSchema(ctx context.Context, databaseURL string) error {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	err := migrations.Check(ctx, databaseURL)
	switch {
	case errors.Is(err, migrations.ErrNotCurrent):
		return fmt.Errorf("refusing to start: %w", err)
	case err != nil:
		return fmt.Errorf("cannot check the database named by %s: %w", EnvDatabaseURL, err)
	}
	return nil
}

// runServer serves the API on ln until ctx ends, then drains: requests in
// flight get cfg.ShutdownGrace to finish, new connections are refused.
func (a *app) runServer(ctx context.Context, cfg serverConfig, ln net.Listener, pool *pgxpool.Pool, logger *slog.Logger) error {
	srv, err := newAPI(pool, cfg, logger)
	if err != nil {
		_ = ln.Close()
		return err
	}
	logger.Info("serving", slog.String("addr", ln.Addr().String()))
	if a.ready != nil {
		a.ready(ln.Addr().String())
	}
	return serveHTTP(ctx, ln, srv.Handler(), cfg.ShutdownGrace, logger)
}

// newAPI wires the domain services on pool into the API.
func newAPI(pool *pgxpool.Pool, cfg serverConfig, logger *slog.Logger) (*api.Server, error) {
	plane := idempotency.NewService(pool, idempotency.Config{})
	return api.New(api.Deps{
		Pool:            pool,
		SavedSearches:   savedsearch.NewStore(pool),
		Snapshots:       snapshot.NewStore(pool),
		Runs:            runs.NewStore(pool, runs.Config{}),
		Starter:         admission.NewStarter(pool, plane, admission.Config{}),
		ProviderJobs:    providerjobs.New(pool, plane, providerjobs.Config{}),
		ProviderSecrets: cfg.ProviderSecrets,
		JWTSecret:       []byte(cfg.JWTSecret),
		Logger:          logger,
		MaxBodyBytes:    cfg.MaxBodyBytes,
	})
}

// serveHTTP serves h on ln until ctx ends, then shuts down gracefully:
// it stops accepting, waits up to grace for requests in flight, and cuts
// off whatever still runs after that. It returns an error when serving
// fails or when requests had to be cut off.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, logger *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
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
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("requests still running after the %s grace were cut off", grace)
	}
	logger.Info("stopped")
	return nil
}

func newLogger(w io.Writer, cfg serverConfig) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
