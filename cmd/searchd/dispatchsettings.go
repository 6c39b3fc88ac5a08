package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

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

// dispatchOptions are the dispatcher's settings, for --help.
func dispatchOptions() []option {
	return []option{
		{"runtime-url", EnvRuntimeURL, "none: dispatch is off, Runs stay queued",
			"the runtime's endpoint (http or https): every admitted Run is POSTed to it as a signed Standard Webhooks message " +
				"whose webhook-id is the Run id, until it answers 2xx. As a flag it must hold no password (ps shows flags)"},
		{"", EnvRuntimeSecret, "required with " + EnvRuntimeURL,
			fmt.Sprintf("the secret deliveries are signed with: whsec_ and the base64 of at least %d random bytes "+
				"(Standard Webhooks), or at least %d bytes used as they are", dispatch.MinSecretLen, dispatch.MinSecretLen)},
		{"runtime-timeout", EnvRuntimeTimeout, dispatch.DefaultTimeout.String(),
			"how long one delivery waits for the runtime's answer before it counts as a retry, more than 0s and at most " +
				dispatch.MaxTimeout.String() + "; a delivery's lease is this plus a quarter, at least 5s more"},
		{"dispatch-interval", EnvDispatchInterval, dispatch.DefaultInterval.String(),
			"time between two lease passes of the dispatcher while nothing is due (a start on this replica wakes it at once), " +
				"more than 0s and at most " + dispatch.MaxInterval.String()},
		{"dispatch-batch", EnvDispatchBatch, strconv.Itoa(dispatch.DefaultBatch),
			fmt.Sprintf("most dispatches one lease pass takes, 1 to %d", dispatch.MaxBatch)},
		{"dispatch-concurrency", EnvDispatchConcurrency, strconv.Itoa(dispatch.DefaultConcurrency),
			fmt.Sprintf("most deliveries in flight in this process, 1 to %d", dispatch.MaxConcurrency)},
		{"dispatch-max-backoff", EnvDispatchMaxBackoff, dispatch.DefaultMaxBackoff.String(),
			"longest wait before a delivery is retried (after a 5xx, 408, 429, timeout or cut connection); the wait starts at " +
				dispatch.DefaultMinBackoff.String() + " and doubles per attempt; from " + dispatch.DefaultMinBackoff.String() +
				" to " + dispatch.MaxMaxBackoff.String()},
	}
}

// readDispatchSettings reads the dispatcher's settings. An unset runtime
// URL leaves cfg.URL empty: dispatch is off. It returns what is wrong, one
// message per setting, none quoting the secret or a password.
func readDispatchSettings(fs *flag.FlagSet, getenv func(string) string) (dispatch.Config, []string) {
	var cfg dispatch.Config
	var problems []string
	bad := func(s setting, format string, args ...any) {
		problems = append(problems, s.name+": "+fmt.Sprintf(format, args...))
	}
	u := lookup(fs, "runtime-url", EnvRuntimeURL, getenv)
	secret := setting{name: EnvRuntimeSecret, value: getenv(EnvRuntimeSecret)}
	if u.value != "" {
		parsed, err := url.Parse(u.value)
		switch {
		case err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "":
			bad(u, "is not an absolute http or https URL, such as https://runtime.internal/searchd/runs")
		case u.name == "--runtime-url" && parsed.User != nil:
			bad(u, "holds credentials, which every local user can read in the process list; set %s instead", EnvRuntimeURL)
		default:
			cfg.URL = u.value
		}
		switch key, err := providerSecret(secret.value); {
		case secret.value == "":
			bad(secret, "is required with %s: the secret the runtime verifies every delivery with "+
				"(whsec_ and the base64 of %d random bytes or more: echo whsec_$(openssl rand -base64 32))", u.name, dispatch.MinSecretLen)
		case err != nil:
			bad(secret, "%v", err)
		case len(key) < dispatch.MinSecretLen:
			bad(secret, "is a key of %d bytes; it must be at least %d", len(key), dispatch.MinSecretLen)
		default:
			cfg.Secret = key
		}
	} else if secret.value != "" {
		bad(secret, "is set but %s is not: set both to turn dispatch on, or neither", EnvRuntimeURL)
	}
	duration := func(fl, env string, def, lo, hi time.Duration) time.Duration {
		s := lookup(fs, fl, env, getenv)
		if s.value == "" {
			return def
		}
		d, err := time.ParseDuration(s.value)
		switch {
		case err != nil:
			bad(s, "%q is not a duration (write it like 10s or 1m)", s.value)
		case d <= lo || d > hi:
			bad(s, "%s is out of range: more than %s and at most %s", d, lo, hi)
		default:
			return d
		}
		return def
	}
	whole := func(fl, env string, def, lo, hi int) int {
		s := lookup(fs, fl, env, getenv)
		if s.value == "" {
			return def
		}
		n, err := strconv.Atoi(s.value)
		switch {
		case err != nil:
			bad(s, "%q is not a whole number", s.value)
		case n < lo || n > hi:
			bad(s, "%d is out of range: from %d to %d", n, lo, hi)
		default:
			return n
		}
		return def
	}
	cfg.Timeout = duration("runtime-timeout", EnvRuntimeTimeout, dispatch.DefaultTimeout, 0, dispatch.MaxTimeout)
	cfg.Interval = duration("dispatch-interval", EnvDispatchInterval, dispatch.DefaultInterval, 0, dispatch.MaxInterval)
	cfg.Batch = whole("dispatch-batch", EnvDispatchBatch, dispatch.DefaultBatch, 1, dispatch.MaxBatch)
	cfg.Concurrency = whole("dispatch-concurrency", EnvDispatchConcurrency, dispatch.DefaultConcurrency, 1, dispatch.MaxConcurrency)
	cfg.MaxBackoff = dispatch.DefaultMaxBackoff
	if s := lookup(fs, "dispatch-max-backoff", EnvDispatchMaxBackoff, getenv); s.value != "" {
		d, err := time.ParseDuration(s.value)
		switch {
		case err != nil:
			bad(s, "%q is not a duration (write it like 30s or 5m)", s.value)
		case d < dispatch.DefaultMinBackoff || d > dispatch.MaxMaxBackoff:
			bad(s, "%s is out of range: from %s (the first wait) to %s", d, dispatch.DefaultMinBackoff, dispatch.MaxMaxBackoff)
		default:
			cfg.MaxBackoff = d
		}
	}
	return cfg, problems
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
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(dctx)
	}()
	logger.Info("dispatching admitted Runs to the runtime", slog.Duration("timeout", dcfg.Timeout),
		slog.Duration("lease", d.Lease()), slog.Int("concurrency", dcfg.Concurrency))
	return func() {
		cancel()
		<-done
	}, nil
}
