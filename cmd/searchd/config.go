package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/sweeper"
)

// Environment variables searchd reads. Each setting also has a flag on the
// subcommands that use it, which wins over the variable, but for the two
// secrets (SEARCHD_JWT_SECRET, SEARCHD_PROVIDER_SECRETS): a flag's value is
// in the process list for every local user to read. See settings.go.
const (
	EnvDatabaseURL   = "DATABASE_URL"
	EnvAddr          = "SEARCHD_ADDR"
	EnvJWTSecret     = "SEARCHD_JWT_SECRET"
	EnvShutdownGrace = "SEARCHD_SHUTDOWN_GRACE"
	EnvMaxBodyBytes  = "SEARCHD_MAX_BODY_BYTES"
	EnvLogLevel      = "SEARCHD_LOG_LEVEL"
	EnvLogFormat     = "SEARCHD_LOG_FORMAT"
	EnvDevDir        = "SEARCHD_DEV_DIR"
	EnvPGBin         = "SEARCHD_PG_BIN"
	// EnvProviderSecrets holds the secrets provider callbacks are signed
	// with, as provider=secret pairs separated by commas.
	EnvProviderSecrets = "SEARCHD_PROVIDER_SECRETS"
	// EnvCallbackMaxBodyBytes limits a provider callback's body, below
	// SEARCHD_MAX_BODY_BYTES: anyone can send one.
	EnvCallbackMaxBodyBytes = "SEARCHD_CALLBACK_MAX_BODY_BYTES"
	// EnvCallbackBodyBudget bounds the bytes of all callback bodies
	// awaiting their signature check together, and EnvCallbackBodyTimeout
	// how long one may take to arrive.
	EnvCallbackBodyBudget  = "SEARCHD_CALLBACK_BODY_BUDGET"
	EnvCallbackBodyTimeout = "SEARCHD_CALLBACK_BODY_TIMEOUT"
)

// Defaults of the settings.
const (
	DefaultAddr          = ":8080"
	DefaultDevAddr       = "127.0.0.1:8080"
	DefaultShutdownGrace = 10 * time.Second
	DefaultDevDir        = ".searchd-dev"

	minMaxBodyBytes  = 1 << 10
	maxMaxBodyBytes  = 1 << 30
	maxShutdownGrace = time.Hour
	// The callback body budget is at least twice the callback limit (see
	// api.Deps.CallbackBodyBudget) and at most 16 GiB; the body timeout
	// from 1s to the server's read timeout.
	maxCallbackBodyBudget  = 16 << 30
	minCallbackBodyTimeout = time.Second
	maxCallbackBodyTimeout = readTimeout
)

// usageError is a mistake in the command line or the configuration: the
// process exits with status 2 and the message says what to change.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// serverConfig is the configuration of `searchd serve` and `searchd dev`.
type serverConfig struct {
	// Addr is the TCP address to listen on.
	Addr string
	// DatabaseURL is the PostgreSQL connection string; dev may leave it
	// empty to run its own cluster.
	DatabaseURL string
	// JWTSecret verifies the HS256 bearer tokens, as raw bytes; empty
	// when only the provider's tokens are accepted (dev uses its
	// generated secret).
	JWTSecret string
	// Auth is the rest of authentication: the provider, the token
	// lifetime, the console's sign-in (authsettings.go).
	Auth authConfig
	// ShutdownGrace is how long a shutdown waits for requests in flight.
	ShutdownGrace time.Duration
	// MaxBodyBytes limits request bodies.
	MaxBodyBytes int64
	// CallbackMaxBodyBytes limits a provider callback's body; at most
	// MaxBodyBytes.
	CallbackMaxBodyBytes int64
	// CallbackBodyBudget and CallbackBodyTimeout bound the callback bodies
	// awaiting their signature check (api.Deps); never zero once loaded.
	CallbackBodyBudget  int64
	CallbackBodyTimeout time.Duration
	// LogLevel and LogFormat ("json" or "text") shape the log on stderr.
	LogLevel  slog.Level
	LogFormat string
	// DevDir holds the local cluster and the dev secret (dev alone).
	DevDir string
	// PGBin is the directory of initdb and postgres, empty to search for
	// them (dev alone).
	PGBin string
	// ProviderSecrets maps each provider to the secret its callbacks are
	// signed with; empty when no provider may call back.
	ProviderSecrets map[string][]byte
	// DBMaxConns sizes the database pool; zero leaves it to the
	// connection string (pool_max_conns), else DefaultDBMaxConns.
	DBMaxConns int32
	// Admission configures the admission queue the API and the console
	// share; its zero Seats is the pool's size.
	Admission admissionConfig
	// MaxPreferWait is the longest Prefer: wait a start honours; zero
	// never waits, and then no claim listener runs.
	MaxPreferWait time.Duration
	// SavedSearchLease is the lease of a saved-search preparation
	// (admission.Config.Lease).
	SavedSearchLease time.Duration
	// Sweep configures the in-process sweeper, but for its Logger and
	// Observer, which the server sets. Its Interval is always explicit:
	// zero runs no sweeper (rather than the sweeper's default hour), for
	// a deployment that runs searchd sweep from an outside scheduler.
	Sweep sweeper.Config
	// Inbox configures the provider inbox's lease and its applier, and
	// Session the server-side bounds of every session (inboxsettings.go).
	Inbox   inboxConfig
	Session sessionBounds
	// Schedule configures the drain of scheduled starts, but for its
	// Clock, Logger and Observer, which the server sets
	// (schedulesettings.go); an Interval of zero runs none.
	Schedule schedule.DrainConfig
	// CORSOrigins are the origins browser pages may call the API from.
	CORSOrigins []string
	// Dispatch configures the dispatcher (dispatchsettings.go), but for
	// its Logger and Observer; an empty URL runs none.
	Dispatch dispatch.Config
}

// setting is one configuration value and where it came from, so a message
// about it names what the user set: the flag when given, else the variable.
type setting struct {
	name  string // "--addr" or "SEARCHD_ADDR"
	value string
}

// lookup reads a setting from flag fl when it was given on fs, else from the
// environment variable env.
func lookup(fs *flag.FlagSet, fl string, env string, getenv func(string) string) setting {
	s := setting{name: env, value: getenv(env)}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == fl {
			s = setting{name: "--" + fl, value: f.Value.String()}
		}
	})
	return s
}

// serverFlags registers the flags of the server settings on fs, and its
// --help; see [serverOptions]. The secrets have no flag.
func serverFlags(fs *flag.FlagSet) { registerOptions(fs, serveCommand) }

// loadServerConfig reads the server settings from the flags on fs and the
// environment. dev relaxes DATABASE_URL and SEARCHD_JWT_SECRET to optional
// and changes the defaults of the address and the log format. Every problem
// is reported, one per line, in a *usageError.
func loadServerConfig(fs *flag.FlagSet, getenv func(string) string, dev bool) (serverConfig, error) {
	var cfg serverConfig
	var problems []string
	bad := func(s setting, format string, args ...any) {
		problems = append(problems, s.name+": "+fmt.Sprintf(format, args...))
	}

	addr := lookup(fs, "addr", EnvAddr, getenv)
	cfg.Addr = addr.value
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
		if dev {
			cfg.Addr = DefaultDevAddr
		}
	}
	if _, port, err := net.SplitHostPort(cfg.Addr); err != nil {
		bad(addr, "%q is not a host:port address (for example :8080 or 127.0.0.1:8080)", cfg.Addr)
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		bad(addr, "port %q is not a number from 0 to 65535", port)
	}

	db := lookup(fs, "database-url", EnvDatabaseURL, getenv)
	cfg.DatabaseURL = db.value
	switch {
	case cfg.DatabaseURL == "" && !dev:
		bad(db, "is required: the PostgreSQL connection string, such as postgres://user:password@localhost:5432/searchd")
	case cfg.DatabaseURL != "":
		if p := databaseURLProblem(db); p != "" {
			bad(db, "%s", p)
		}
	}

	var authProblems []string
	cfg.JWTSecret, cfg.Auth, authProblems = readAuthSettings(fs, getenv, dev)
	problems = append(problems, authProblems...)

	grace := lookup(fs, "shutdown-grace", EnvShutdownGrace, getenv)
	cfg.ShutdownGrace = DefaultShutdownGrace
	if grace.value != "" {
		d, err := time.ParseDuration(grace.value)
		switch {
		case err != nil:
			bad(grace, "%q is not a duration (write it like 10s or 1m30s)", grace.value)
		case d < 0 || d > maxShutdownGrace:
			bad(grace, "%s is out of range: from 0s to %s", d, maxShutdownGrace)
		default:
			cfg.ShutdownGrace = d
		}
	}

	lease := lookup(fs, "saved-search-lease", EnvSavedSearchLease, getenv)
	cfg.SavedSearchLease = DefaultSavedSearchLease
	if lease.value != "" {
		d, err := time.ParseDuration(lease.value)
		switch {
		case err != nil:
			bad(lease, "%q is not a duration (write it like 30s or 3s)", lease.value)
		case d <= 0 || d > MaxSavedSearchLease || admission.Config{Lease: d}.Validate() != nil:
			// Zero would mean the default to admission; here it is a mistake.
			bad(lease, "%s is out of range: more than 0s and at most %s, the limit of a saved-search lease "+
				"(after a crash the key is blocked for a whole lease)", d, MaxSavedSearchLease)
		default:
			cfg.SavedSearchLease = d
		}
	}

	body := lookup(fs, "max-body-bytes", EnvMaxBodyBytes, getenv)
	cfg.MaxBodyBytes = api.DefaultMaxBodyBytes
	if body.value != "" {
		n, err := strconv.ParseInt(body.value, 10, 64)
		switch {
		case err != nil:
			bad(body, "%q is not a whole number of bytes", body.value)
		case n < minMaxBodyBytes || n > maxMaxBodyBytes:
			bad(body, "%d is out of range: from %d to %d", n, minMaxBodyBytes, maxMaxBodyBytes)
		default:
			cfg.MaxBodyBytes = n
		}
	}

	// The callback limit defaults to 1 MiB, or the body limit when that is
	// lower; set above the body limit, it would be no limit of its own.
	cbBody := lookup(fs, "callback-max-body-bytes", EnvCallbackMaxBodyBytes, getenv)
	cfg.CallbackMaxBodyBytes = min(api.DefaultCallbackMaxBodyBytes, cfg.MaxBodyBytes)
	if cbBody.value != "" {
		n, err := strconv.ParseInt(cbBody.value, 10, 64)
		switch {
		case err != nil:
			bad(cbBody, "%q is not a whole number of bytes", cbBody.value)
		case n < minMaxBodyBytes || n > cfg.MaxBodyBytes:
			bad(cbBody, "%d is out of range: from %d to the body limit, %s (%d)", n, minMaxBodyBytes, body.name, cfg.MaxBodyBytes)
		default:
			cfg.CallbackMaxBodyBytes = n
		}
	}

	// The budget defaults to 64 MiB, or twice the callback limit when that
	// is more: one body of the limit must fit beside the quarter kept for
	// small ones.
	budget := lookup(fs, "callback-body-budget", EnvCallbackBodyBudget, getenv)
	minBudget := 2 * cfg.CallbackMaxBodyBytes
	cfg.CallbackBodyBudget = max(api.DefaultCallbackBodyBudget, minBudget)
	if budget.value != "" {
		n, err := strconv.ParseInt(budget.value, 10, 64)
		switch {
		case err != nil:
			bad(budget, "%q is not a whole number of bytes", budget.value)
		case n < minBudget || n > maxCallbackBodyBudget:
			bad(budget, "%d is out of range: from twice the callback limit, %s (%d), to %d",
				n, cbBody.name, minBudget, int64(maxCallbackBodyBudget))
		default:
			cfg.CallbackBodyBudget = n
		}
	}
	cbTimeout := lookup(fs, "callback-body-timeout", EnvCallbackBodyTimeout, getenv)
	cfg.CallbackBodyTimeout = api.DefaultCallbackBodyTimeout
	if cbTimeout.value != "" {
		d, err := time.ParseDuration(cbTimeout.value)
		switch {
		case err != nil:
			bad(cbTimeout, "%q is not a duration (write it like 10s)", cbTimeout.value)
		case d < minCallbackBodyTimeout || d > maxCallbackBodyTimeout:
			bad(cbTimeout, "%s is out of range: from %s to %s", d, minCallbackBodyTimeout, maxCallbackBodyTimeout)
		default:
			cfg.CallbackBodyTimeout = d
		}
	}

	var logProblems []string
	cfg.LogLevel, cfg.LogFormat, logProblems = readLogSettings(fs, getenv, dev)
	problems = append(problems, logProblems...)
	problems = append(problems, readPoolAndWaitSettings(fs, getenv, &cfg)...)
	problems = append(problems, readCORSSetting(fs, getenv, &cfg)...)
	var sweepProblems []string
	cfg.Sweep, sweepProblems = readSweepSettings(fs, getenv, true)
	problems = append(problems, sweepProblems...)
	var inboxProblems []string
	cfg.Inbox, cfg.Session, inboxProblems = readInboxSettings(fs, getenv)
	problems = append(problems, inboxProblems...)
	var dispatchProblems []string
	cfg.Dispatch, dispatchProblems = readDispatchSettings(fs, getenv)
	problems = append(problems, dispatchProblems...)
	var admissionProblems []string
	cfg.Admission, admissionProblems = readAdmissionSettings(fs, getenv)
	problems = append(problems, admissionProblems...)
	var scheduleProblems []string
	cfg.Schedule, scheduleProblems = readScheduleSettings(fs, getenv, cfg.SavedSearchLease)
	problems = append(problems, scheduleProblems...)

	// Environment only: a flag would show the secrets in the process list.
	providers := setting{name: EnvProviderSecrets, value: getenv(EnvProviderSecrets)}
	var secretProblems []string
	cfg.ProviderSecrets, secretProblems = parseProviderSecrets(providers.value)
	for _, p := range secretProblems {
		bad(providers, "%s", p)
	}

	if dev {
		cfg.DevDir = lookup(fs, "dev-dir", EnvDevDir, getenv).value
		if cfg.DevDir == "" {
			cfg.DevDir = DefaultDevDir
		}
		cfg.PGBin = lookup(fs, "pg-bin", EnvPGBin, getenv).value
	}

	if len(problems) > 0 {
		return cfg, &usageError{msg: "invalid configuration:\n  " + strings.Join(problems, "\n  ")}
	}
	return cfg, nil
}

// parseProviderSecrets reads provider callback secrets written as
// "acme=secret1,other=secret2": comma-separated entries, each a provider
// name, "=", and the secret, which is everything after the first "=" (so a
// base64 secret may end in "="; it cannot hold a comma). White space around
// names and secrets is ignored. Names are claim scope names (lower-case
// dotted identifiers) and appear once; secrets are not empty. A secret is
// used as its raw bytes, except one written as Standard Webhooks prints
// them, "whsec_" and standard base64: then the key is the decoded bytes,
// which is what a Standard Webhooks provider signs with. An empty value
// configures no provider. It returns every problem found; none quotes a
// secret.
func parseProviderSecrets(value string) (map[string][]byte, []string) {
	secrets := map[string][]byte{}
	if strings.TrimSpace(value) == "" {
		return secrets, nil
	}
	var problems []string
	for i, entry := range strings.Split(value, ",") {
		n := i + 1
		entry = strings.TrimSpace(entry)
		name, secret, found := strings.Cut(entry, "=")
		name, secret = strings.TrimSpace(name), strings.TrimSpace(secret)
		switch {
		case entry == "":
			problems = append(problems, fmt.Sprintf("entry %d is empty; write provider=secret pairs separated by commas", n))
		case !found:
			problems = append(problems, fmt.Sprintf("entry %d has no \"=\"; write it as provider=secret", n))
		case providerjobs.ValidateProvider(name) != nil:
			problems = append(problems, fmt.Sprintf("entry %d: %q is not a provider name: use lower-case letters, digits, '_' and '-', with dots between them, at most 100 characters", n, name))
		case secret == "":
			problems = append(problems, fmt.Sprintf("entry %d: the secret of provider %q is empty", n, name))
		case secrets[name] != nil:
			problems = append(problems, fmt.Sprintf("entry %d: provider %q appears more than once", n, name))
		default:
			key, err := providerSecret(secret)
			if err != nil {
				problems = append(problems, fmt.Sprintf("entry %d: the secret of provider %q %v", n, name, err))
				continue
			}
			secrets[name] = key
		}
	}
	return secrets, problems
}

// standardWebhooksSecretPrefix starts a secret written as Standard Webhooks
// prints them: the prefix, then the key in standard base64.
const standardWebhooksSecretPrefix = "whsec_"

// providerSecret returns the key of a provider secret as written: its raw
// bytes, or the decoded key of a "whsec_" secret. The error completes "the
// secret of provider ... " and never quotes the secret.
func providerSecret(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, standardWebhooksSecretPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	switch {
	case err != nil:
		return nil, errors.New(`starts with "whsec_" but the rest is not standard base64`)
	case len(key) == 0:
		return nil, errors.New(`is "whsec_" and nothing else`)
	}
	return key, nil
}

// errHelp is returned for -h: usage was printed, and the exit status is 0.
var errHelp = errors.New("help requested")
