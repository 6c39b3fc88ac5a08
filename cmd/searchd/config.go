package main

import (
	"cmp"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs/runstream"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/sweeper"
	"github.com/searchd/searchd/webhooks"
)

// Environment variables searchd reads. Each setting also has a flag on the
// subcommands that use it, which wins over the variable, but for the
// secrets: a flag's value is in the process list for every local user to
// read. [settingsTable] declares each.
const (
	envSavedSearchLease         = "SEARCHD_SAVED_SEARCH_LEASE"
	envDatabaseURL              = "DATABASE_URL"
	envAddr                     = "SEARCHD_ADDR"
	envJWTSecret                = "SEARCHD_JWT_SECRET"
	envMaxBodyBytes             = "SEARCHD_MAX_BODY_BYTES"
	envDevDir                   = "SEARCHD_DEV_DIR"
	envCallbackMaxBodyBytes     = "SEARCHD_CALLBACK_MAX_BODY_BYTES"
	envTokenMaxLifetime         = "SEARCHD_TOKEN_MAX_LIFETIME"
	envOIDCIssuer               = "SEARCHD_OIDC_ISSUER"
	envOIDCAudience             = "SEARCHD_OIDC_AUDIENCE"
	envOIDCClientID             = "SEARCHD_OIDC_CLIENT_ID"
	envOIDCRedirectURL          = "SEARCHD_OIDC_REDIRECT_URL"
	envConsoleTokenSignIn       = "SEARCHD_CONSOLE_TOKEN_SIGN_IN"
	envRuntimeURL               = "SEARCHD_RUNTIME_URL"
	envRuntimeSecret            = "SEARCHD_RUNTIME_SECRET"
	envDispatchInterval         = "SEARCHD_DISPATCH_INTERVAL"
	envScheduleLease            = "SEARCHD_SCHEDULE_LEASE"
	envProviderWebhookLease     = "SEARCHD_PROVIDER_WEBHOOK_LEASE"
	envApplierInterval          = "SEARCHD_APPLIER_INTERVAL"
	envApplierBatch             = "SEARCHD_APPLIER_BATCH"
	envIdleInTransactionTimeout = "SEARCHD_DB_IDLE_IN_TRANSACTION_TIMEOUT"
	envLockTimeout              = "SEARCHD_DB_LOCK_TIMEOUT"
)

// Limits of the callback body settings, which depend on others: the
// budget is at least twice the callback limit (api.Deps.CallbackBodyBudget)
// and at most 16 GiB.
const (
	minMaxBodyBytes       = 1 << 10
	maxCallbackBodyBudget = 16 << 30
)

// usageError is a mistake in the command line or the configuration: the
// process exits with status 2 and the message says what to change.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// serverConfig is the configuration of `searchd serve` and `searchd dev`:
// each field holds the setting of [settingsTable] that names it, and
// [defaults] and [serverConfig.validate] hold the default and the range
// of those that are cmd/searchd's own.
type serverConfig struct {
	Addr        string
	DatabaseURL string // empty in dev when dev runs its own cluster
	// JWTSecret verifies the HS256 bearer tokens; empty when only the
	// provider's tokens are accepted.
	JWTSecret      string
	Auth           authConfig
	ShutdownGrace  time.Duration
	MaxBodyBytes   int64
	MaxHeaderBytes int64
	// The callback body settings are never zero once loaded (api.Deps).
	CallbackMaxBodyBytes int64
	CallbackBodyBudget   int64
	CallbackBodyTimeout  time.Duration
	LogLevel             slog.Level
	LogFormat            string // "json" or "text"
	DevDir, PGBin        string // dev alone; PGBin empty to search
	ProviderSecrets      map[string][]byte
	// DBMaxConns zero leaves the pool's size to the URL's pool_max_conns,
	// else defaultDBMaxConns.
	DBMaxConns int32
	// Seats' zero Seats is the pool's size, its zero WideSeats a share of
	// the processors (seats.go).
	Seats            seatq.Config
	MaxPreferWait    time.Duration // zero never waits: no claim listener runs
	SavedSearchLease time.Duration
	// Sweep's Interval zero runs no sweeper, rather than the sweeper's
	// default hour.
	Sweep   sweeper.Config
	Inbox   inboxConfig
	Session sessionBounds
	// DBAnswerTimeout is the client-side bound on waiting for the
	// database (dbwait.go); zero is none.
	DBAnswerTimeout time.Duration
	Schedule        schedule.DrainConfig // a zero Interval runs no drain
	ScheduleMax     int
	CORSOrigins     []string
	Dispatch        dispatch.Config // an empty URL runs no dispatcher
	Webhooks        webhookConfig
	Streams         runstream.Config
	renamed         []string // the old names of settings used, one warning each
}

// validate returns the first of cmd/searchd's own settings out of range,
// as "searchd: Config.F is V; it must be R"; a zero that means a default
// (DBMaxConns, the callback body settings) is in range. The rows of [settingsTable] take
// their range from it.
func (c serverConfig) validate() error {
	ms := func(d time.Duration) bool { return d >= 0 && d <= time.Hour && d%time.Millisecond == 0 }
	in := func(d, lo, hi time.Duration) bool { return d >= lo && d <= hi }
	msRange := "whole milliseconds from 0s to " + time.Hour.String()
	limit, budget := c.callbackLimits()
	for _, f := range []struct {
		name string
		v    any
		ok   bool
		rng  string
	}{
		{"DBMaxConns", c.DBMaxConns, c.DBMaxConns >= 0 && c.DBMaxConns <= 1000, "from 1 to 1000"},
		{"IdleInTransaction", c.Session.IdleInTransaction, ms(c.Session.IdleInTransaction), msRange},
		{"Lock", c.Session.Lock, ms(c.Session.Lock), msRange},
		{"Statement", c.Session.Statement, ms(c.Session.Statement), msRange},
		{"DBAnswerTimeout", c.DBAnswerTimeout, c.DBAnswerTimeout == 0 || in(c.DBAnswerTimeout, time.Second, time.Hour), "0s (none), or from 1s to 1h0m0s"},
		{"ShutdownGrace", c.ShutdownGrace, in(c.ShutdownGrace, 0, time.Hour), "from 0s to 1h0m0s"},
		{"MaxBodyBytes", c.MaxBodyBytes, c.MaxBodyBytes >= minMaxBodyBytes && c.MaxBodyBytes <= 1<<30,
			fmt.Sprintf("from %d to %d", minMaxBodyBytes, 1<<30)},
		{"MaxHeaderBytes", c.MaxHeaderBytes, c.MaxHeaderBytes >= 4<<10 && c.MaxHeaderBytes <= 1<<20, // Go's default, 1 MiB
			fmt.Sprintf("from %d to %d", 4<<10, 1<<20)},
		{"CallbackMaxBodyBytes", c.CallbackMaxBodyBytes, limit >= minMaxBodyBytes && limit <= c.MaxBodyBytes,
			fmt.Sprintf("from %d to the body limit, %s (%d)", minMaxBodyBytes, envMaxBodyBytes, c.MaxBodyBytes)},
		{"CallbackBodyBudget", c.CallbackBodyBudget, budget >= 2*limit && budget <= maxCallbackBodyBudget,
			fmt.Sprintf("from twice the callback limit, %s (%d), to %d", envCallbackMaxBodyBytes, 2*limit, int64(maxCallbackBodyBudget))},
		{"MaxPreferWait", c.MaxPreferWait, in(c.MaxPreferWait, 0, api.PreferWaitLimit) && c.MaxPreferWait%time.Second == 0,
			"whole seconds from 0s to " + api.PreferWaitLimit.String()},
		// After a crash a saved-search key is blocked for a whole lease.
		{"SavedSearchLease", c.SavedSearchLease, in(c.SavedSearchLease, 1, 5*time.Minute), "more than 0s and at most 5m0s"},
		{"MaxLifetime", c.Auth.MaxLifetime, in(c.Auth.MaxLifetime, time.Minute, 30*24*time.Hour), "from 1m0s to 720h0m0s"},
		{"SessionLifetime", c.Auth.SessionLifetime, in(c.Auth.SessionLifetime, time.Minute, 7*24*time.Hour), "from 1m0s to 168h0m0s"},
		{"CallbackBodyTimeout", c.CallbackBodyTimeout, in(c.CallbackBodyTimeout, time.Second, readTimeout), "from 1s to " + readTimeout.String()},
		{"Lease", c.Inbox.Lease, in(c.Inbox.Lease, 1, 10*time.Minute), "more than 0s and at most 10m0s"},
		{"ScheduleMax", c.ScheduleMax, c.ScheduleMax >= 1 && c.ScheduleMax <= 1_000_000, "from 1 to 1000000"},
		{"Interval", c.Sweep.Interval, c.Sweep.Interval >= 0, "0s (no sweeper) or more"},
		{"Budget", c.Sweep.Budget, c.Sweep.Budget >= time.Second, "1s or more"},
	} {
		if !f.ok {
			return fmt.Errorf("searchd: Config.%s is %v; it must be %s", f.name, f.v, f.rng)
		}
	}
	return nil
}

// callbackLimits are the callback body limit and budget, or for zero
// their defaults: 1 MiB, or the body limit when lower (set above it, the
// limit would be none of its own); 64 MiB, or twice the limit when more
// (one body of the limit must fit beside the quarter kept for small ones).
func (c serverConfig) callbackLimits() (limit, budget int64) {
	limit = cmp.Or(c.CallbackMaxBodyBytes, min(api.DefaultCallbackMaxBodyBytes, c.MaxBodyBytes))
	return limit, cmp.Or(c.CallbackBodyBudget, max(api.DefaultCallbackBodyBudget, 2*limit))
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

// loadCommand parses args as the flags of command c, which has none but
// its settings' (serve, dev, migrate, sweep), and reads its settings: the
// rows of [settingsTable] it reads, from the flags and the environment.
// Every problem is reported, one per line, in a *usageError.
func (a *app) loadCommand(name string, c command, args []string) (serverConfig, error) {
	fs := a.flagSet(name, c)
	if err := parse(fs, args); err != nil {
		return serverConfig{}, err
	}
	cfg, problems := loadSettings(fs, a.getenv, c.reads)
	if len(problems) > 0 {
		return cfg, invalid(problems)
	}
	return cfg, nil
}

// parseProviderSecretsSetting reads SEARCHD_PROVIDER_SECRETS into the
// configuration; see [parseProviderSecrets].
func parseProviderSecretsSetting(r *reader, s setting) string {
	var problems []string
	r.cfg.ProviderSecrets, problems = parseProviderSecrets(s.value)
	for _, p := range problems {
		r.bad(s, "%s", p)
	}
	return ""
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

// providerSecret returns the key of a provider secret as written: its raw
// bytes, or the decoded key of a "whsec_" secret. The error completes "the
// secret of provider ... " and never quotes the secret.
func providerSecret(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, "whsec_")
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

// authConfig is how serve and dev authenticate: OIDC is the provider of
// the API's tokens and SignIn the console's registration at it, each nil
// for none.
type authConfig struct {
	MaxLifetime     time.Duration // auth.Config.MaxLifetime
	OIDC            *auth.OIDCConfig
	SignIn          *auth.SignInConfig
	SessionLifetime time.Duration
	TokenSignIn     bool
}

// inboxConfig configures the provider inbox; an Applier.Interval of zero
// runs no applier.
type inboxConfig struct {
	Lease   time.Duration // providerjobs.Config.Lease
	Applier providerjobs.ApplierConfig
}

// sessionBounds are PostgreSQL's idle_in_transaction_session_timeout,
// lock_timeout and statement_timeout on every session of the pool; zero
// leaves one off.
type sessionBounds struct{ IdleInTransaction, Lock, Statement time.Duration }

type webhookConfig struct {
	Worker            webhooks.WorkerConfig
	AllowHTTPLoopback bool // http:// endpoints on a loopback host
}
