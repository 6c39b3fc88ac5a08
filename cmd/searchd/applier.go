package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/providerjobs"
)

// newPlane returns the idempotency plane on pool at clock, reporting to the
// metrics.
func newPlane(pool *pgxpool.Pool, clock *dbclock.Clock, obs observability) *idempotency.Service {
	cfg := idempotency.Config{Clock: clock}
	if obs.metrics != nil {
		cfg.Observer = obs.metrics
	}
	return idempotency.NewService(pool, cfg)
}

// newProviderJobs returns the provider jobs service of serve and dev: the
// callback handler's and the applier's. wake wakes this process's applier.
func newProviderJobs(pool *pgxpool.Pool, plane *idempotency.Service, cfg serverConfig, logger *slog.Logger, obs observability, wake func()) *providerjobs.Service {
	pcfg := providerjobs.Config{Lease: cfg.Inbox.Lease, Logger: logger, Wake: wake}
	if obs.metrics != nil {
		pcfg.Observer = obs.metrics
	}
	return providerjobs.New(pool, plane, pcfg)
}

// startApplier starts the background applier of the provider inbox, and
// returns the function that stops it and waits for it. It applies the
// deliveries a replica stored and did not finish (see providerjobs). An
// Interval of zero runs none. It applies with st's provider jobs service,
// the one the callback handler lands deliveries with.
func startApplier(ctx context.Context, st *stores, cfg serverConfig, logger *slog.Logger) func() {
	if cfg.Inbox.Applier.Interval <= 0 {
		return func() {}
	}
	svc := st.providerJobs
	acfg := cfg.Inbox.Applier
	acfg.Wake = st.wake
	return background(ctx, func(ctx context.Context) {
		if err := svc.RunApplier(ctx, acfg); err != nil {
			logger.Error("the applier did not start", slog.String("error", err.Error()))
		}
	})
}
