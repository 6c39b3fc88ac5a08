package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/readiness"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/telemetry"
	"github.com/searchd/searchd/migrations"
	"github.com/searchd/searchd/runs/runstream"
)

// startupTimeout bounds the database checks before serving.
const startupTimeout = 30 * time.Second

// HTTP server timeouts: generous for a JSON API with 4 MiB bodies, finite
// so a slow or idle client cannot hold a connection for ever.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
)

func (a *app) serve(ctx context.Context, args []string) error {
	cfg, err := a.loadCommand("serve", serveCommand, args)
	if err != nil {
		return err
	}
	logger := newLogger(a.stderr, cfg)
	warnRemovedSettings(logger, a.getenv, cfg.renamed)
	setMemoryLimit(logger, memlimit.FromCgroup)
	obs, err := newObservability(ctx, a.getenv)
	if err != nil {
		return err
	}
	defer obs.shutdown(logger) // after the pool: the last spans are flushed
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err := checkSchema(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	st, err := a.openStores(ctx, cfg, logger, obs)
	if err != nil {
		return err
	}
	defer st.pool.Close() // last: after the hub has stopped and every request ended
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("%s=%s: cannot listen: %w", envAddr, cfg.Addr, err)
	}
	return a.runServer(ctx, cfg, ln, st, logger, obs)
}

// openStores opens the pool of serve and dev (see [observability.openPool])
// and constructs the stores on it. Their cursors are signed with the key
// read from the database (migration 00022), once at startup, so that every
// replica, before and after a restart, accepts the cursors any other
// minted. The caller closes the stores' pool.
func (a *app) openStores(ctx context.Context, cfg serverConfig, logger *slog.Logger, obs observability) (*stores, error) {
	pool, err := obs.openPool(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the database pool: %w", err)
	}
	keyCtx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	cursors, err := keyset.LoadKey(keyCtx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot read the cursor key from the database named by %s: %w", envDatabaseURL, err)
	}
	return newStores(pool, a.dbClock, cursors, cfg, logger, obs), nil
}

// checkSchema refuses a database that lacks a migration of this binary:
// serving an older schema would fail requests one by one. A newer schema
// (a newer release migrated first, expand-then-contract) is served; the
// readiness check logs it.
func checkSchema(ctx context.Context, databaseURL string) error {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	_, err := migrations.Check(ctx, databaseURL)
	switch {
	case errors.Is(err, migrations.ErrNotCurrent):
		return fmt.Errorf("refusing to start: %w", err)
	case err != nil:
		return fmt.Errorf("cannot check the database named by %s: %w", envDatabaseURL, err)
	}
	return nil
}

// server is what serve and dev run on: the stores constructed once on the
// pool, the settings, the log, what the service is observed with (its
// metrics never nil) and the seat queue every door shares.
type server struct {
	st     *stores
	cfg    serverConfig
	logger *slog.Logger
	obs    observability
	queue  *seatq.Queue
	// watch paces the backlog's watcher: its Interval and WarnEvery, the
	// defaults when zero (tests shorten them).
	watch dispatch.WatchConfig
}

// runServer serves the API on ln until ctx ends, then drains: requests in
// flight get cfg.ShutdownGrace to finish, new connections are refused, and
// what still runs is cancelled (see serveHTTP). The claim listener of
// Prefer: wait runs for as long as the server does; the background loops
// until ctx ends. All have returned when runServer does, so the caller may close
// the pool. Everything runs on st, and reports to obs's metrics
// (newObservability's, never nil).
func (a *app) runServer(ctx context.Context, cfg serverConfig, ln net.Listener, st *stores, logger *slog.Logger, obs observability) error {
	defer ln.Close() // on an error before serving; serving closes it already
	pool := st.pool
	// One seat queue for every door: the API's requests, the
	// console's pages, the callbacks and the drain's scheduled starts
	// share its seats.
	queue, err := newSeatQueue(cfg.Seats, pool, obs.metrics)
	if err != nil {
		return err
	}
	s := server{st: st, cfg: cfg, logger: logger, obs: obs, queue: queue, watch: a.backlogWatch}
	hub, stopHub := startHub(ctx, pool, cfg, logger)
	defer stopHub()
	// The background loops, each a nil run when its settings turn it off,
	// stopped in the reverse order; the drain's admissions wake the
	// dispatcher, started before it.
	for _, loop := range []func() (func(context.Context), error){s.sweeper, s.applier, s.dispatcher, s.webhookWorker, s.drain} {
		run, err := loop()
		if err != nil {
			return err
		}
		if run != nil {
			defer background(ctx, run)()
		}
	}
	// Readiness is checked in the background on a connection of its own,
	// so probes cost the request pool nothing (see readiness.Checker).
	ready := readiness.NewChecker(pool.Config().ConnConfig, readiness.DefaultInterval, logger)
	ready.Check(ctx) // ready from the first probe
	defer background(context.WithoutCancel(ctx), ready.Run)()
	verifier, err := newVerifier(ctx, cfg)
	if err != nil {
		return err
	}
	// The Runs' event streams, the API's and the console's under one cap.
	// They end when ctx does, before the drain: a stream lasts until its
	// Run finishes, so the drain would otherwise wait out its grace for
	// them. Their clients reconnect with Last-Event-ID elsewhere.
	streams, err := runstream.New(cfg.Streams, st.runs, logger)
	if err != nil {
		return err
	}
	stopStreams := context.AfterFunc(ctx, streams.Close)
	defer stopStreams()
	srv, err := s.api(verifier, hub, ready.Ready, streams)
	if err != nil {
		return err
	}
	con, err := s.console(verifier, streams)
	if err != nil {
		return err
	}
	logger.Info("serving", slog.String("addr", ln.Addr().String()), slog.String("console", console.Prefix))
	if a.ready != nil {
		a.ready(ln.Addr().String())
	}
	return serveHTTP(ctx, ln, con.Mount(srv.Handler()), cfg.ShutdownGrace, int(cfg.MaxHeaderBytes), logger)
}

// api wires the domain services of the stores into the API; starts wait
// on Prefer: wait only with hub set (see [server.starter]). /readyz
// answers from ready. Every request takes a seat in the queue first (see
// newSeatQueue).
func (s server) api(verifier api.Verifier, hub *idempotency.Hub, ready func(context.Context) error, streams *runstream.Hub) (*api.Server, error) {
	st, cfg := s.st, s.cfg
	b := buildInfo()
	// Registered once per registry: a second server on the same metrics
	// (tests) keeps the first's, which says the same.
	_ = s.obs.metrics.SetBuildInfo(b.Version, b.Commit, b.GoVersion)
	starter, err := s.starter(hub)
	if err != nil {
		return nil, err
	}
	return api.New(api.Deps{
		Ready:                ready,
		Seats:                s.queue,
		SavedSearches:        st.savedSearches,
		Snapshots:            st.snapshots,
		Runs:                 st.runs,
		Starter:              starter,
		ProviderJobs:         st.providerJobs,
		Dispatches:           st.dispatches,
		Schedules:            st.schedules,
		ServiceKeys:          st.serviceKeys,
		Webhooks:             st.webhooks,
		ProviderSecrets:      cfg.ProviderSecrets,
		Verifier:             verifier,
		Logger:               s.logger,
		MaxBodyBytes:         cfg.MaxBodyBytes,
		CallbackMaxBodyBytes: cfg.CallbackMaxBodyBytes,
		CallbackBodyBudget:   cfg.CallbackBodyBudget,
		CallbackBodyTimeout:  cfg.CallbackBodyTimeout,
		MaxPreferWait:        cfg.MaxPreferWait,
		Metrics:              s.obs.metrics,
		TracerProvider:       s.obs.tracerProvider(),
		Plane:                st.plane,
		CORSOrigins:          cfg.CORSOrigins,
		Streams:              streams,
	})
}

// starter returns the saved-search starter of the API and the drain, on
// the stores; its starts wait on Prefer: wait only with hub set, and wake
// the dispatcher (so make the dispatcher first).
func (s server) starter(hub *idempotency.Hub) (*admission.Starter, error) {
	st := s.st
	return admission.NewStarter(admission.Deps{
		Pool: st.pool, Plane: st.plane, SavedSearches: st.savedSearches, Snapshots: st.snapshots, Runs: st.runs,
	}, admission.Config{Hub: hub, Lease: s.cfg.SavedSearchLease, Admitted: st.wakeDispatcher})
}

// newLogger returns the logger of cfg's level and format. A line logged
// with a request's context names the request (and its trace, when traced).
func newLogger(w io.Writer, cfg serverConfig) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(telemetry.NewLogHandler(h))
}
