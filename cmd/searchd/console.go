package main

import (
	"log/slog"

	"github.com/searchd/searchd/console"
)

// newConsole wires the console (served under /console/ beside the API) on
// the same stores and secret as the API.
func newConsole(st *stores, cfg serverConfig, logger *slog.Logger) (*console.Console, error) {
	return console.New(console.Deps{
		SavedSearches: st.savedSearches,
		Snapshots:     st.snapshots,
		Runs:          st.runs,
		JobAudit:      st.jobAudit,
		Operator:      st.operator,
		SweeperRuns:   st.sweeperRuns,
		Inbox:         st.jobAudit,
		Uncertain:     st.uncertain,
		Resolver:      st.resolver,
		JWTSecret:     []byte(cfg.JWTSecret),
		Logger:        logger,
	})
}
