package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/telemetry"
	"github.com/searchd/searchd/providerjobs"
)

// newPlane returns the idempotency plane on pool, reporting to the
// metrics.
func newPlane(pool *pgxpool.Pool, obs observability) *idempotency.Service {
	cfg := idempotency.Config{}
	if obs.metrics != nil {
		cfg.Observer = obs.metrics
	}
	return idempotency.NewService(pool, cfg)
}

// newProviderJobs returns the provider jobs service of serve and dev: the
// callback handler's and the applier's.
func newProviderJobs(pool *pgxpool.Pool, plane *idempotency.Service, cfg serverConfig, logger *slog.Logger, obs observability) *providerjobs.Service {
	pcfg := providerjobs.Config{Lease: cfg.Inbox.Lease, Logger: logger, Wake: cfg.wake}
	if obs.metrics != nil {
		pcfg.Observer = obs.metrics
	}
	return providerjobs.New(pool, plane, pcfg)
}

// startApplier starts the background applier of the provider inbox, and
// returns the function that stops it and waits for it. It applies the
// deliveries a replica stored and did not finish (see providerjobs). An
// Interval of zero runs none.
func startApplier(ctx context.Context, pool *pgxpool.Pool, cfg serverConfig, logger *slog.Logger, obs observability, wake <-chan struct{}) func() {
	if cfg.Inbox.Applier.Interval <= 0 {
		return func() {}
	}
	if obs.metrics == nil {
		obs.metrics = telemetry.NewMetrics()
	}
	svc := newProviderJobs(pool, newPlane(pool, obs), cfg, logger, obs)
	acfg := cfg.Inbox.Applier
	acfg.Wake = wake
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := svc.RunApplier(actx, acfg); err != nil {
			logger.Error("the applier did not start", slog.String("error", err.Error()))
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
