package main

import (
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs/runstream"
	"github.com/searchd/searchd/sessions"
	"github.com/searchd/searchd/tools"
)

// console wires the console (served under /console/ beside the API) on
// the same stores, verifier and seat queue as the API, with the stores
// only it reads made here on their pool, clock and cursor key, signing
// people in through the provider when the settings register the console
// there.
func (s server) console(verifier *auth.Verifier, streams *runstream.Hub) (*console.Console, error) {
	st, cfg, logger := s.st, s.cfg, s.logger
	d := console.Deps{
		SavedSearches:   st.savedSearches,
		Snapshots:       st.snapshots,
		Runs:            st.runs,
		JobAudit:        providerjobs.NewAudit(st.pool).Cursors(st.cursors),
		Operator:        operator.NewStore(st.pool, st.clock).Cursors(st.cursors),
		SweeperRuns:     st.sweeperRuns,
		Dispatches:      st.dispatches,
		Backlog:         st.backlog,
		Schedules:       st.schedules,
		Webhooks:        st.webhooks,
		Uncertain:       tools.NewInspector(st.pool, st.clock).Cursors(st.cursors),
		Resolver:        tools.NewResolver(st.pool, tools.ResolverConfig{Clock: st.clock}),
		Sessions:        sessions.NewStore(st.pool, st.clock),
		ServiceKeys:     st.serviceKeys,
		TokenSignIn:     cfg.Auth.TokenSignIn,
		Verifier:        verifier,
		SessionLifetime: cfg.Auth.SessionLifetime,
		Logger:          logger,
		Seats:           s.queue,
		Streams:         streams,
	}
	var err error
	if cfg.Auth.SignIn != nil {
		if d.SignIn, err = auth.NewSignIn(verifier, *cfg.Auth.SignIn); err != nil {
			return nil, err
		}
	}
	if cfg.Auth.TokenSignIn {
		logger.Warn("console: token sign-in is on: anyone with a bearer token may sign in to the console by pasting it " +
			"(development; " + envConsoleTokenSignIn + ")")
	}
	return console.New(d)
}
