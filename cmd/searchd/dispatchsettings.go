package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/searchd/searchd/dispatch"
)

// Environment variables of the dispatcher: where the runtime is, the
// secret its deliveries are signed with, and how the dispatcher paces
// them.
const (
	// EnvRuntimeURL is the runtime's endpoint; unset, dispatch is off.
	EnvRuntimeURL = "SEARCHD_RUNTIME_URL"
	// EnvRuntimeSecret is the Standard Webhooks secret deliveries are
	// signed with (environment only: a secret).
	EnvRuntimeSecret = "SEARCHD_RUNTIME_SECRET"
	// EnvRuntimeTimeout bounds one delivery's HTTP request.
	EnvRuntimeTimeout = "SEARCHD_RUNTIME_TIMEOUT"
	// EnvDispatchInterval is the time between two lease passes while
	// nothing is due.
	EnvDispatchInterval = "SEARCHD_DISPATCH_INTERVAL"
	// EnvDispatchBatch is the most dispatches one lease pass takes.
	EnvDispatchBatch = "SEARCHD_DISPATCH_BATCH"
	// EnvDispatchConcurrency is the most deliveries in flight in a process.
	EnvDispatchConcurrency = "SEARCHD_DISPATCH_CONCURRENCY"
	// EnvDispatchMaxBackoff is the longest wait before a retry.
	EnvDispatchMaxBackoff = "SEARCHD_DISPATCH_MAX_BACKOFF"
)

// runtimeURLProblem checks the runtime's endpoint; a flag's must hold no
// credentials. No message quotes it.
func runtimeURLProblem(s setting) string {
	u, err := url.Parse(s.value)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "is not an absolute http or https URL, such as https://runtime.internal/searchd/runs"
	case strings.HasPrefix(s.name, "--") && u.User != nil:
		return "holds credentials, which every local user can read in the process list; set " + EnvRuntimeURL + " instead"
	}
	return ""
}

// parseRuntimeSecret reads the secret deliveries are signed with, which
// the runtime's URL (read before it) requires, and which is set with it
// alone. No message quotes it.
func parseRuntimeSecret(r *reader, s setting) string {
	c := &r.cfg.Dispatch
	c.Secret = nil
	key, err := providerSecret(s.value)
	switch u := r.given[EnvRuntimeURL]; {
	case u.value == "" && s.value != "":
		return "is set but " + EnvRuntimeURL + " is not: set both to turn dispatch on, or neither"
	case u.value == "":
		return ""
	case s.value == "":
		return fmt.Sprintf("is required with %s: the secret the runtime verifies every delivery with "+
			"(whsec_ and the base64 of %d random bytes or more: echo whsec_$(openssl rand -base64 32))", u.name, dispatch.MinSecretLen)
	case err != nil:
		return err.Error()
	case len(key) < dispatch.MinSecretLen:
		return fmt.Sprintf("is a key of %d bytes; it must be at least %d", len(key), dispatch.MinSecretLen)
	}
	c.Secret = key
	return ""
}

// startDispatcher starts the dispatcher of the outbox when a runtime is
// configured, and returns the function that stops it and waits for its
// deliveries in flight (each bounded by its lease). Without a runtime it
// logs that dispatch is off (Runs are admitted and stay queued, their
// dispatches pending until a replica with a runtime delivers them) and
// starts nothing.
func startDispatcher(ctx context.Context, st *stores, cfg serverConfig, logger *slog.Logger, obs observability) (func(), error) {
	st.wakeDispatcher = func() {}
	if cfg.Dispatch.URL == "" {
		logger.Info("dispatch is off: " + EnvRuntimeURL + " is not set, so admitted Runs stay queued with their dispatch pending")
		return func() {}, nil
	}
	dcfg := cfg.Dispatch
	dcfg.Logger = logger
	if obs.metrics != nil {
		dcfg.Observer = obs.metrics
	}
	b := buildInfo()
	dcfg.UserAgent = "searchd/" + b.Version
	d, err := dispatch.NewDispatcher(st.dispatches, dcfg)
	if err != nil {
		return nil, err
	}
	st.wakeDispatcher = d.Wake
	stop := background(ctx, func(ctx context.Context) { _ = d.Run(ctx) })
	logger.Info("dispatching admitted Runs to the runtime", slog.Duration("timeout", dcfg.Timeout),
		slog.Duration("lease", d.Lease()), slog.Int("concurrency", dcfg.Concurrency))
	return stop, nil
}
