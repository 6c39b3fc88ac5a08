package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"

	"github.com/searchd/searchd/dispatch"
)

// Environment variables of the dispatcher: where the runtime is, the
// secret its deliveries are signed with, and how the dispatcher paces
// them.
const (
	envRuntimeURL          = "SEARCHD_RUNTIME_URL"
	envRuntimeSecret       = "SEARCHD_RUNTIME_SECRET"
	envRuntimeTimeout      = "SEARCHD_RUNTIME_TIMEOUT"
	envDispatchInterval    = "SEARCHD_DISPATCH_INTERVAL"
	envDispatchBatch       = "SEARCHD_DISPATCH_BATCH"
	envDispatchConcurrency = "SEARCHD_DISPATCH_CONCURRENCY"
	envDispatchMaxBackoff  = "SEARCHD_DISPATCH_MAX_BACKOFF"
)

// runtimeURLProblem checks the runtime's endpoint, as dispatch.Config
// does; a flag's must hold no credentials. No message quotes it.
func runtimeURLProblem(s setting) string {
	if err := dispatchProblem(dispatch.Config{URL: s.value}, "URL"); err != "" {
		return err
	}
	if u, _ := url.Parse(s.value); strings.HasPrefix(s.name, "--") && u.User != nil {
		return "holds credentials, which every local user can read in the process list; set " + envRuntimeURL + " instead"
	}
	return ""
}

// dispatchProblem is what c's Validate says of its field name, or "".
func dispatchProblem(c dispatch.Config, name string) string {
	if err := c.Validate(); err != nil && strings.HasPrefix(err.Error(), "dispatch: Config."+name+" ") {
		return err.Error()
	}
	return ""
}

// parseRuntimeSecret reads the secret deliveries are signed with, which
// the runtime's URL (read before it) requires, and which is set with it
// alone. No message quotes it.
func parseRuntimeSecret(r *reader, s setting) string {
	key, err := providerSecret(s.value)
	switch u := r.given[envRuntimeURL]; {
	case u.value == "" && s.value != "":
		return "is set but " + envRuntimeURL + " is not: set both to turn dispatch on, or neither"
	case u.value == "":
		return ""
	case s.value == "":
		return fmt.Sprintf("is required with %s: the secret the runtime verifies every delivery with "+
			"(whsec_ and the base64 of %d random bytes or more: echo whsec_$(openssl rand -base64 32))", u.name, dispatch.MinSecretLen)
	case err != nil:
		return err.Error()
	case dispatchProblem(dispatch.Config{URL: u.value, Secret: key}, "Secret") != "":
		return dispatchProblem(dispatch.Config{URL: u.value, Secret: key}, "Secret")
	}
	r.cfg.Dispatch.Secret = key
	return ""
}

// dispatchRemedy is what the warnings of dispatch off ask for.
const dispatchRemedy = "set " + envRuntimeURL + " and " + envRuntimeSecret + " on this replica to deliver them (docs/runtime.md)"

// dispatcher returns the run of the backlog's watcher and, when a runtime
// is configured, of the dispatcher of the outbox; it returns when both
// have (the dispatcher once its deliveries in flight, each bounded by its
// lease, have). Without a runtime, dispatch is off: admitted Runs stay
// queued, their dispatches pending until a replica with a runtime delivers
// them. That is said with a WARN at start, and the watcher says it again
// (count, oldest age, the settings to set) every few minutes while Runs
// are pending, and reports it in the metrics and the console.
func (s server) dispatcher() (func(context.Context), error) {
	st := s.st
	st.wakeDispatcher = func() {}
	on := s.cfg.Dispatch.URL != ""
	w, err := dispatch.NewWatcher(st.dispatches, dispatch.WatchConfig{Dispatching: on,
		Interval: s.watch.Interval, WarnEvery: s.watch.WarnEvery, Remedy: dispatchRemedy,
		Logger: s.logger, Observer: s.obs.metrics})
	if err != nil {
		return nil, err
	}
	st.backlog = w
	if !on {
		s.logger.Warn("dispatch is off: " + envRuntimeURL + " is not set, so admitted Runs stay queued with their dispatch pending " +
			"until a replica with a runtime delivers them; " + dispatchRemedy)
		return func(ctx context.Context) { _ = w.Run(ctx) }, nil
	}
	dcfg := s.cfg.Dispatch
	dcfg.Logger, dcfg.Observer, dcfg.UserAgent = s.logger, s.obs.metrics, "searchd/"+buildInfo().Version
	d, err := dispatch.NewDispatcher(st.dispatches, dcfg)
	if err != nil {
		return nil, err
	}
	st.wakeDispatcher = d.Wake
	s.logger.Info("dispatching admitted Runs to the runtime", slog.Duration("timeout", dcfg.Timeout),
		slog.Duration("lease", d.Lease()), slog.Int("concurrency", dcfg.Concurrency))
	return func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Go(func() { _ = w.Run(ctx) })
		_ = d.Run(ctx)
		wg.Wait()
	}, nil
}
