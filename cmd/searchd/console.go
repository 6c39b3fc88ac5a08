package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
	"github.com/searchd/searchd/sweeper"
	"github.com/searchd/searchd/tools"
)

// newConsole wires the console (served under /console/ beside the API) on
// the same stores and secret as the API.
func newConsole(pool *pgxpool.Pool, cfg serverConfig, logger *slog.Logger) (*console.Console, error) {
	return console.New(console.Deps{
		SavedSearches: savedsearch.NewStore(pool),
		Snapshots:     snapshot.NewStore(pool),
		Runs:          runs.NewStore(pool, runs.Config{}),
		ProviderJobs:  providerjobs.New(pool, idempotency.NewService(pool, idempotency.Config{}), providerjobs.Config{}),
		JobAudit:      providerjobs.NewAudit(pool),
		Operator:      operator.NewStore(pool, nil),
		SweeperRuns:   sweeper.NewRunLog(pool, sweeper.ViaServe, nil, nil),
		Inbox:         providerjobs.NewAudit(pool),
		Uncertain:     tools.NewInspector(pool, nil),
		Resolver:      tools.NewResolver(pool, tools.ResolverConfig{}),
		JWTSecret:     []byte(cfg.JWTSecret),
		Logger:        logger,
	})
}
