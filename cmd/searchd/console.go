package main

import (
	"log/slog"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/internal/fairq"
)

// newConsole wires the console (served under /console/ beside the API) on
// the same stores, verifier and admission queue as the API, signing
// people in through the provider when cfg registers the console there.
func newConsole(st *stores, cfg serverConfig, verifier *auth.Verifier, logger *slog.Logger, queue *fairq.Queue) (*console.Console, error) {
	d := console.Deps{
		SavedSearches:   st.savedSearches,
		Snapshots:       st.snapshots,
		Runs:            st.runs,
		ProviderJobs:    st.providerJobs,
		JobAudit:        st.jobAudit,
		Operator:        st.operator,
		SweeperRuns:     st.sweeperRuns,
		Dispatches:      st.dispatches,
		Inbox:           st.jobAudit,
		Schedules:       st.schedules,
		Uncertain:       st.uncertain,
		Resolver:        st.resolver,
		Sessions:        st.sessions,
		TokenSignIn:     cfg.Auth.TokenSignIn,
		Verifier:        verifier,
		SessionLifetime: cfg.Auth.SessionLifetime,
		Logger:          logger,
		Admission:       queue,
	}
	if cfg.Auth.SignIn != nil {
		signIn, err := auth.NewSignIn(verifier, *cfg.Auth.SignIn)
		if err != nil {
			return nil, err
		}
		d.SignIn = signIn
	}
	if cfg.Auth.TokenSignIn {
		logger.Warn("console: token sign-in is on: anyone with a bearer token may sign in to the console by pasting it " +
			"(development; " + EnvConsoleTokenSignIn + ")")
	}
	return console.New(d)
}
