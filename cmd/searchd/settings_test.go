package main

import (
	"context"
	"errors"
	"flag"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// helpSetting is a setting as a command's --help must show it: the flag
// ("" for a secret, which has none), the variable and the default.
type helpSetting struct{ flag, env, def string }

// wantHelpListing runs searchd with args (a command and --help), which
// must exit 0, checks that its help lists each of settings with its
// default, and returns the help.
func wantHelpListing(t *testing.T, settings []helpSetting, args ...string) string {
	t.Helper()
	h := newHarness(nil)
	if code := h.run(args...); code != 0 {
		t.Fatalf("%s = %d, want 0", strings.Join(args, " "), code)
	}
	help := h.stderr.String()
	for _, s := range settings {
		name := "--" + s.flag + ", " + s.env
		if s.flag == "" {
			name = s.env + " (environment only: a secret)"
		}
		if entry := "\n  " + name + "\n        default: " + s.def + "\n"; !strings.Contains(help, entry) {
			t.Errorf("%s does not list %q with its default %q:\n%s", strings.Join(args, " "), name, s.def, help)
		}
	}
	return help
}

// serveSettings lists every setting of serve as --help must show it.
var serveSettings = []helpSetting{
	{"database-url", "DATABASE_URL", "required"},
	{"db-max-conns", "SEARCHD_DB_MAX_CONNS", "pool_max_conns of the URL, else 16"},
	{"db-statement-timeout", "SEARCHD_DB_STATEMENT_TIMEOUT", "15s"},
	{"seats", "SEARCHD_SEATS", "the pool's size (--db-max-conns)"},
	{"seat-queue-length", "SEARCHD_SEAT_QUEUE_LENGTH", "512"},
	{"seat-max-wait", "SEARCHD_SEAT_MAX_WAIT", "10s"},
	{"addr", "SEARCHD_ADDR", ":8080"},
	{"", "SEARCHD_JWT_SECRET", "required unless SEARCHD_OIDC_ISSUER is set"},
	{"", "SEARCHD_PROVIDER_SECRETS", "none: no provider may call back"},
	{"shutdown-grace", "SEARCHD_SHUTDOWN_GRACE", "10s"},
	{"max-body-bytes", "SEARCHD_MAX_BODY_BYTES", "4194304"},
	{"callback-max-body-bytes", "SEARCHD_CALLBACK_MAX_BODY_BYTES", "1048576, or the body limit when lower"},
	{"callback-body-budget", "SEARCHD_CALLBACK_BODY_BUDGET", "67108864, or twice the callback limit when more"},
	{"callback-body-timeout", "SEARCHD_CALLBACK_BODY_TIMEOUT", "10s"},
	{"max-prefer-wait", "SEARCHD_MAX_PREFER_WAIT", "30s"},
	{"saved-search-lease", "SEARCHD_SAVED_SEARCH_LEASE", "30s"},
	{"sweep-interval", "SEARCHD_SWEEP_INTERVAL", "1h"},
	{"sweep-jitter", "SEARCHD_SWEEP_JITTER", "10% of the interval (6m at 1h)"},
	{"sweep-bound", "SEARCHD_SWEEP_BOUND", "1000, or the ceiling when that is lower"},
	{"sweep-max-bound", "SEARCHD_SWEEP_MAX_BOUND", "1000"},
	{"sweep-budget", "SEARCHD_SWEEP_BUDGET", "15m"},
	{"sweep-duty", "SEARCHD_SWEEP_DUTY", "0.25"},
	{"runtime-url", "SEARCHD_RUNTIME_URL", "none: dispatch is off, Runs stay queued"},
	{"", "SEARCHD_RUNTIME_SECRET", "required with SEARCHD_RUNTIME_URL"},
	{"runtime-timeout", "SEARCHD_RUNTIME_TIMEOUT", "10s"},
	{"dispatch-interval", "SEARCHD_DISPATCH_INTERVAL", "1s"},
	{"dispatch-batch", "SEARCHD_DISPATCH_BATCH", "100"},
	{"dispatch-concurrency", "SEARCHD_DISPATCH_CONCURRENCY", "16"},
	{"dispatch-max-backoff", "SEARCHD_DISPATCH_MAX_BACKOFF", "5m0s"},
	{"schedule-tick", "SEARCHD_SCHEDULE_TICK", "1s"},
	{"schedule-batch", "SEARCHD_SCHEDULE_BATCH", "10"},
	{"schedule-lease", "SEARCHD_SCHEDULE_LEASE", "twice the saved-search lease (1m0s)"},
	{"schedule-retry", "SEARCHD_SCHEDULE_RETRY", "1h0m0s"},
	{"log-level", "SEARCHD_LOG_LEVEL", "info"},
	{"log-format", "SEARCHD_LOG_FORMAT", "json"},
	{"token-max-lifetime", "SEARCHD_TOKEN_MAX_LIFETIME", "24h0m0s"},
	{"oidc-issuer", "SEARCHD_OIDC_ISSUER", "none"},
	{"oidc-audience", "SEARCHD_OIDC_AUDIENCE", "none (required with the issuer)"},
	{"oidc-org-claim", "SEARCHD_OIDC_ORG_CLAIM", "org_id"},
	{"oidc-actor-claim", "SEARCHD_OIDC_ACTOR_CLAIM", "sub"},
	{"oidc-role-claim", "SEARCHD_OIDC_ROLE_CLAIM", "roles"},
	{"oidc-operator-role", "SEARCHD_OIDC_OPERATOR_ROLE", "none: no provider token is an operator's"},
	{"oidc-client-id", "SEARCHD_OIDC_CLIENT_ID", "none: the console does not sign in through the provider"},
	{"", "SEARCHD_OIDC_CLIENT_SECRET", "none: a public client (PKCE alone)"},
	{"oidc-redirect-url", "SEARCHD_OIDC_REDIRECT_URL", "none (required with the client id)"},
	{"oidc-scopes", "SEARCHD_OIDC_SCOPES", "openid"},
	{"console-session-lifetime", "SEARCHD_CONSOLE_SESSION_LIFETIME", "8h0m0s"},
	{"console-token-sign-in", "SEARCHD_CONSOLE_TOKEN_SIGN_IN", "false"},
}

func TestServeHelpListsEverySetting(t *testing.T) {
	t.Parallel()
	help := wantHelpListing(t, serveSettings, "serve", "--help")
	// Every flag serve accepts is a listed setting: none is left out.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	serverFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(help, "--"+f.Name+", ") && !strings.Contains(help, "(--"+f.Name+")") { // an old name in ()
			t.Errorf("flag --%s is not in serve --help", f.Name)
		}
	})

	h := newHarness(nil)
	if code := h.run("dev", "--help"); code != 0 ||
		!strings.Contains(h.stderr.String(), "--dev-dir, SEARCHD_DEV_DIR") ||
		!strings.Contains(h.stderr.String(), "--pg-bin, SEARCHD_PG_BIN") ||
		!strings.Contains(h.stderr.String(), "default: 127.0.0.1:8080") {
		t.Errorf("dev --help = %d:\n%s\nwant dev's own settings and defaults", code, h.stderr.String())
	}
	for _, cmd := range [][]string{{"migrate", "--help"}, {"token", "--help"}, {"claims", "show", "--help"}, {"claims", "release", "--help"}, {"sweep", "--help"}} {
		h = newHarness(nil)
		if code := h.run(cmd...); code != 0 || !strings.Contains(h.stderr.String(), "usage: searchd "+cmd[0]) {
			t.Errorf("%v = %d %q, want 0 and its usage", cmd, code, h.stderr.String())
		}
	}
}

func TestEverySettingIsReadFromItsFlagAndItsVariable(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"DATABASE_URL":       "postgres://searchd@localhost:5432/searchd",
		"SEARCHD_JWT_SECRET": goodSecret,
	}
	tests := []struct {
		flag, env, bad, want string // want: the message after "<name>: "
	}{
		{"addr", "SEARCHD_ADDR", "nope", `"nope" is not a host:port address`},
		{"database-url", "DATABASE_URL", "postgres://u@h:notaport/x", "is not a valid PostgreSQL connection string"},
		{"db-max-conns", "SEARCHD_DB_MAX_CONNS", "many", `"many" is not a whole number of connections`},
		{"db-max-conns", "SEARCHD_DB_MAX_CONNS", "0", "0 is out of range: from 1 to 1000"},
		{"db-max-conns", "SEARCHD_DB_MAX_CONNS", "1001", "1001 is out of range: from 1 to 1000"},
		{"shutdown-grace", "SEARCHD_SHUTDOWN_GRACE", "ten", `"ten" is not a duration`},
		{"max-body-bytes", "SEARCHD_MAX_BODY_BYTES", "12", "12 is out of range"},
		{"callback-max-body-bytes", "SEARCHD_CALLBACK_MAX_BODY_BYTES", "1MiB", `"1MiB" is not a whole number of bytes`},
		{"callback-max-body-bytes", "SEARCHD_CALLBACK_MAX_BODY_BYTES", "12", "12 is out of range: from 1024 to the body limit, SEARCHD_MAX_BODY_BYTES (4194304)"},
		{"callback-max-body-bytes", "SEARCHD_CALLBACK_MAX_BODY_BYTES", "4194305", "4194305 is out of range: from 1024 to the body limit"},
		{"callback-body-budget", "SEARCHD_CALLBACK_BODY_BUDGET", "64MiB", `"64MiB" is not a whole number of bytes`},
		{"callback-body-budget", "SEARCHD_CALLBACK_BODY_BUDGET", "2097151", "2097151 is out of range: from twice the callback limit, SEARCHD_CALLBACK_MAX_BODY_BYTES (2097152), to 17179869184"},
		{"callback-body-budget", "SEARCHD_CALLBACK_BODY_BUDGET", "17179869185", "17179869185 is out of range"},
		{"callback-body-timeout", "SEARCHD_CALLBACK_BODY_TIMEOUT", "soon", `"soon" is not a duration`},
		{"callback-body-timeout", "SEARCHD_CALLBACK_BODY_TIMEOUT", "500ms", "500ms is out of range: from 1s to 1m0s"},
		{"callback-body-timeout", "SEARCHD_CALLBACK_BODY_TIMEOUT", "61s", "1m1s is out of range: from 1s to 1m0s"},
		{"max-prefer-wait", "SEARCHD_MAX_PREFER_WAIT", "soon", `"soon" is not a duration`},
		{"max-prefer-wait", "SEARCHD_MAX_PREFER_WAIT", "31s", "31s is out of range: whole seconds from 0s to 30s"},
		{"max-prefer-wait", "SEARCHD_MAX_PREFER_WAIT", "1500ms", "1.5s is out of range: whole seconds"},
		{"max-prefer-wait", "SEARCHD_MAX_PREFER_WAIT", "-1s", "-1s is out of range"},
		{"saved-search-lease", "SEARCHD_SAVED_SEARCH_LEASE", "long", `"long" is not a duration`},
		{"saved-search-lease", "SEARCHD_SAVED_SEARCH_LEASE", "0s", "0s is out of range: more than 0s and at most 5m0s"},
		{"saved-search-lease", "SEARCHD_SAVED_SEARCH_LEASE", "-3s", "-3s is out of range"},
		{"saved-search-lease", "SEARCHD_SAVED_SEARCH_LEASE", "5m1s", "5m1s is out of range: more than 0s and at most 5m0s"},
		{"saved-search-lease", "SEARCHD_SAVED_SEARCH_LEASE", "720h", "720h0m0s is out of range: more than 0s and at most 5m0s"},
		{"saved-search-lease", "SEARCHD_SAVED_SEARCH_LEASE", "721h", "721h0m0s is out of range"},
		{"sweep-interval", "SEARCHD_SWEEP_INTERVAL", "hourly", `"hourly" is not a duration`},
		{"sweep-interval", "SEARCHD_SWEEP_INTERVAL", "-1h", "-1h is out of range: 0s (no sweeper) or more"},
		{"sweep-jitter", "SEARCHD_SWEEP_JITTER", "some", `"some" is not a duration`},
		{"sweep-jitter", "SEARCHD_SWEEP_JITTER", "90m", "1h30m is out of range: from 0s to the sweep interval (1h)"},
		{"sweep-jitter", "SEARCHD_SWEEP_JITTER", "-1s", "-1s is out of range"},
		{"sweep-bound", "SEARCHD_SWEEP_BOUND", "0", "0 is out of range: from 1 to MaxBound, 1000 (sweeper: Config.Bound)"},
		{"sweep-bound", "SEARCHD_SWEEP_BOUND", "1001", "Bound 1001 exceeds MaxBound 1000"},
		{"sweep-max-bound", "SEARCHD_SWEEP_MAX_BOUND", "x", `"x" is not a whole number`},
		{"sweep-budget", "SEARCHD_SWEEP_BUDGET", "500ms", "500ms is out of range: 1s or more"},
		{"sweep-duty", "SEARCHD_SWEEP_DUTY", "1.5", "1.5 is out of range: above 0 and at most 1"},
		{"db-statement-timeout", "SEARCHD_DB_STATEMENT_TIMEOUT", "long", `"long" is not a duration`},
		{"db-statement-timeout", "SEARCHD_DB_STATEMENT_TIMEOUT", "2h", "2h0m0s is out of range: whole milliseconds from 0s to 1h0m0s"},
		{"db-statement-timeout", "SEARCHD_DB_STATEMENT_TIMEOUT", "1500us", "1.5ms is out of range"},
		{"seats", "SEARCHD_SEATS", "lots", `"lots" is not a whole number of requests`},
		{"seats", "SEARCHD_SEATS", "0", "0 is out of range: from 1 to 10000"},
		{"seats", "SEARCHD_SEATS", "10001", "10001 is out of range: from 1 to 10000"},
		{"seat-queue-length", "SEARCHD_SEAT_QUEUE_LENGTH", "many", `"many" is not a whole number of requests`},
		{"seat-queue-length", "SEARCHD_SEAT_QUEUE_LENGTH", "0", "0 is out of range: from 1 to 100000"},
		{"seat-max-wait", "SEARCHD_SEAT_MAX_WAIT", "forever", `"forever" is not a duration`},
		{"seat-max-wait", "SEARCHD_SEAT_MAX_WAIT", "0s", "0s is out of range: more than 0s and at most 5m0s"},
		{"seat-max-wait", "SEARCHD_SEAT_MAX_WAIT", "6m", "6m0s is out of range: more than 0s and at most 5m0s"},
		{"runtime-url", "SEARCHD_RUNTIME_URL", "ftp://runtime", "dispatch: Config.URL is not an absolute http or https URL"},
		{"runtime-url", "SEARCHD_RUNTIME_URL", "runtime:8080/x", "dispatch: Config.URL is not an absolute http or https URL"},
		{"runtime-timeout", "SEARCHD_RUNTIME_TIMEOUT", "soon", `"soon" is not a duration`},
		{"runtime-timeout", "SEARCHD_RUNTIME_TIMEOUT", "0s", "0s is out of range: more than 0s and at most 5m0s"},
		{"runtime-timeout", "SEARCHD_RUNTIME_TIMEOUT", "6m", "6m0s is out of range: more than 0s and at most 5m0s"},
		{"dispatch-interval", "SEARCHD_DISPATCH_INTERVAL", "0s", "0s is out of range: more than 0s and at most 1h0m0s"},
		{"dispatch-batch", "SEARCHD_DISPATCH_BATCH", "0", "0 is out of range: from 1 to 1000"},
		{"dispatch-batch", "SEARCHD_DISPATCH_BATCH", "many", `"many" is not a whole number`},
		{"dispatch-concurrency", "SEARCHD_DISPATCH_CONCURRENCY", "1001", "1001 is out of range: from 1 to 1000"},
		{"dispatch-max-backoff", "SEARCHD_DISPATCH_MAX_BACKOFF", "500ms", "500ms is out of range: from 1s (the first wait) to 24h0m0s"},
		{"dispatch-max-backoff", "SEARCHD_DISPATCH_MAX_BACKOFF", "25h", "25h0m0s is out of range"},
		{"schedule-tick", "SEARCHD_SCHEDULE_TICK", "often", `"often" is not a duration`},
		{"schedule-tick", "SEARCHD_SCHEDULE_TICK", "2h", "2h0m0s is out of range: from 0s to 1h0m0s"},
		{"schedule-batch", "SEARCHD_SCHEDULE_BATCH", "0", "0 is out of range: from 1 to 1000"},
		{"schedule-batch", "SEARCHD_SCHEDULE_BATCH", "ten", `"ten" is not a whole number`},
		{"schedule-lease", "SEARCHD_SCHEDULE_LEASE", "500ms", "500ms is out of range: from 1s to 1h0m0s"},
		{"schedule-lease", "SEARCHD_SCHEDULE_LEASE", "30s", "30s must be longer than the saved-search lease, SEARCHD_SAVED_SEARCH_LEASE (30s)"},
		{"schedule-retry", "SEARCHD_SCHEDULE_RETRY", "25h", "25h0m0s is out of range: from 1s to 24h0m0s"},
		{"log-level", "SEARCHD_LOG_LEVEL", "loud", `"loud" is not a level`},
		{"log-format", "SEARCHD_LOG_FORMAT", "xml", `"xml" is not a log format`},
		{"token-max-lifetime", "SEARCHD_TOKEN_MAX_LIFETIME", "a day", `"a day" is not a duration`},
		{"token-max-lifetime", "SEARCHD_TOKEN_MAX_LIFETIME", "59s", "59s is out of range: from 1m0s to 720h0m0s"},
		{"oidc-issuer", "SEARCHD_OIDC_ISSUER", "idp.example.com", `"idp.example.com" is not an absolute URL`},
		{"oidc-audience", "SEARCHD_OIDC_AUDIENCE", "searchd", "is set without SEARCHD_OIDC_ISSUER"},
		{"oidc-org-claim", "SEARCHD_OIDC_ORG_CLAIM", "a b", `"a b" is not a claim name`},
		{"oidc-actor-claim", "SEARCHD_OIDC_ACTOR_CLAIM", "a\tb", `"a\tb" is not a claim name`},
		{"oidc-role-claim", "SEARCHD_OIDC_ROLE_CLAIM", strings.Repeat("r", 101), `"` + strings.Repeat("r", 101) + `" is not a claim name: at most 100 bytes`},
		{"oidc-client-id", "SEARCHD_OIDC_CLIENT_ID", "console", "needs SEARCHD_OIDC_ISSUER"},
		{"oidc-redirect-url", "SEARCHD_OIDC_REDIRECT_URL", "/console/oidc/callback", `"/console/oidc/callback" is not an absolute URL`},
		{"console-session-lifetime", "SEARCHD_CONSOLE_SESSION_LIFETIME", "169h", "169h0m0s is out of range: from 1m0s to 168h0m0s"},
		{"console-token-sign-in", "SEARCHD_CONSOLE_TOKEN_SIGN_IN", "maybe", `"maybe" is not true or false`},
	}
	for _, tt := range tests {
		wantBadSetting(t, "serve", base, tt.flag, tt.env, tt.bad, tt.want)
	}
}

// wantBadSetting runs searchd cmd with bad as the setting's variable (over
// base) and as its flag: each run must exit 2 saying "<name>: want".
func wantBadSetting(t *testing.T, cmd string, base map[string]string, flag, env, bad, want string) {
	t.Helper()
	vars := maps.Clone(base)
	vars[env] = bad
	h := newHarness(vars)
	if code := h.run(cmd); code != 2 || !strings.Contains(h.stderr.String(), env+": "+want) {
		t.Errorf("%s=%s: %s = %d %q, want 2 saying %q", env, bad, cmd, code, h.stderr.String(), env+": "+want)
	}
	h = newHarness(base)
	if code := h.run(cmd, "--"+flag, bad); code != 2 || !strings.Contains(h.stderr.String(), "--"+flag+": "+want) {
		t.Errorf("--%s %s: %s = %d %q, want 2 saying %q", flag, bad, cmd, code, h.stderr.String(), "--"+flag+": "+want)
	}
}

func TestSettingsTakeFlagsOverVariablesAndDefaults(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string, dev bool, args ...string) serverConfig {
		t.Helper()
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		if dev {
			registerOptions(fs, devCommand)
		} else {
			serverFlags(fs)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadServerConfig(fs, func(k string) string { return env[k] }, dev)
		if err != nil {
			t.Fatalf("loadServerConfig(%v, %v): %v", env, args, err)
		}
		return cfg
	}
	env := map[string]string{"DATABASE_URL": "postgres://env@localhost/db", "SEARCHD_JWT_SECRET": goodSecret}
	cfg := load(env, false)
	if cfg.MaxPreferWait != 30*time.Second || cfg.DBMaxConns != 0 || cfg.ShutdownGrace != 10*time.Second ||
		cfg.Addr != ":8080" || cfg.LogFormat != "json" || cfg.SavedSearchLease != 30*time.Second {
		t.Errorf("defaults = %+v", cfg)
	}
	env["SEARCHD_MAX_PREFER_WAIT"], env["SEARCHD_DB_MAX_CONNS"], env["SEARCHD_SAVED_SEARCH_LEASE"] = "5s", "7", "3s"
	if cfg = load(env, false); cfg.MaxPreferWait != 5*time.Second || cfg.DBMaxConns != 7 || cfg.SavedSearchLease != 3*time.Second {
		t.Errorf("from the variables: wait %s, conns %d, lease %s; want 5s, 7 and 3s", cfg.MaxPreferWait, cfg.DBMaxConns, cfg.SavedSearchLease)
	}
	cfg = load(env, false, "--max-prefer-wait", "0s", "--db-max-conns", "3", "--database-url", "postgres://flag@localhost/db",
		"--saved-search-lease", "1500ms")
	if cfg.MaxPreferWait != 0 || cfg.DBMaxConns != 3 || cfg.DatabaseURL != "postgres://flag@localhost/db" || cfg.SavedSearchLease != 1500*time.Millisecond {
		t.Errorf("flags over variables: wait %s, conns %d, url %q, lease %s", cfg.MaxPreferWait, cfg.DBMaxConns, cfg.DatabaseURL, cfg.SavedSearchLease)
	}
	// The limit itself is a lease.
	if cfg = load(env, false, "--saved-search-lease", "5m0s"); cfg.SavedSearchLease != 5*time.Minute {
		t.Errorf("--saved-search-lease 5m0s: lease %s, want the limit accepted", cfg.SavedSearchLease)
	}
	// The callback body limit: 1 MiB, or the body limit when lower; set,
	// the flag over the variable.
	if cfg = load(env, false); cfg.CallbackMaxBodyBytes != 1<<20 || cfg.MaxBodyBytes != 4<<20 {
		t.Errorf("default body limits: callback %d, others %d; want 1048576 and 4194304", cfg.CallbackMaxBodyBytes, cfg.MaxBodyBytes)
	}
	if cfg = load(env, false, "--max-body-bytes", "4096"); cfg.CallbackMaxBodyBytes != 4096 {
		t.Errorf("--max-body-bytes 4096: callback limit %d, want the body limit, 4096", cfg.CallbackMaxBodyBytes)
	}
	env["SEARCHD_CALLBACK_MAX_BODY_BYTES"] = "65536"
	if cfg = load(env, false); cfg.CallbackMaxBodyBytes != 65536 {
		t.Errorf("SEARCHD_CALLBACK_MAX_BODY_BYTES=65536: callback limit %d", cfg.CallbackMaxBodyBytes)
	}
	if cfg = load(env, false, "--callback-max-body-bytes", "2048"); cfg.CallbackMaxBodyBytes != 2048 {
		t.Errorf("--callback-max-body-bytes 2048 over the variable: callback limit %d", cfg.CallbackMaxBodyBytes)
	}
	delete(env, "SEARCHD_CALLBACK_MAX_BODY_BYTES")
	// The callback body budget: 64 MiB, or twice the callback limit when
	// more; the body timeout 10s; set, the flag over the variable.
	if cfg = load(env, false); cfg.CallbackBodyBudget != 64<<20 || cfg.CallbackBodyTimeout != 10*time.Second {
		t.Errorf("default callback body budget %d and timeout %s, want 67108864 and 10s", cfg.CallbackBodyBudget, cfg.CallbackBodyTimeout)
	}
	if cfg = load(env, false, "--max-body-bytes", "1073741824", "--callback-max-body-bytes", "52428800"); cfg.CallbackBodyBudget != 100<<20 {
		t.Errorf("a 50 MiB callback limit: budget %d, want twice it (104857600)", cfg.CallbackBodyBudget)
	}
	env["SEARCHD_CALLBACK_BODY_BUDGET"], env["SEARCHD_CALLBACK_BODY_TIMEOUT"] = "8388608", "3s"
	if cfg = load(env, false); cfg.CallbackBodyBudget != 8<<20 || cfg.CallbackBodyTimeout != 3*time.Second {
		t.Errorf("from the variables: budget %d, timeout %s; want 8388608 and 3s", cfg.CallbackBodyBudget, cfg.CallbackBodyTimeout)
	}
	if cfg = load(env, false, "--callback-body-budget", "4194304", "--callback-body-timeout", "1m"); cfg.CallbackBodyBudget != 4<<20 || cfg.CallbackBodyTimeout != time.Minute {
		t.Errorf("flags over variables: budget %d, timeout %s; want 4194304 and 1m", cfg.CallbackBodyBudget, cfg.CallbackBodyTimeout)
	}
	delete(env, "SEARCHD_CALLBACK_BODY_BUDGET")
	delete(env, "SEARCHD_CALLBACK_BODY_TIMEOUT")
	// The seat queue: its seats zero (the pool's size), the rest
	// seatq's defaults, unless set, the flag over the variable.
	if cfg = load(env, false); cfg.Seats != (seatq.Config{QueueLength: seatq.DefaultQueueLength, MaxWait: seatq.DefaultMaxWait}) {
		t.Errorf("default admission %+v, want the pool's size (zero) and seatq's defaults", cfg.Seats)
	}
	env["SEARCHD_SEATS"], env["SEARCHD_SEAT_QUEUE_LENGTH"], env["SEARCHD_SEAT_MAX_WAIT"] = "12", "7", "2s"
	env["SEARCHD_WIDE_SEATS"] = "6"
	if cfg = load(env, false); cfg.Seats != (seatq.Config{Seats: 12, QueueLength: 7, MaxWait: 2 * time.Second, WideSeats: 6}) {
		t.Errorf("admission variables: %+v", cfg.Seats)
	}
	if cfg = load(env, false, "--seats", "5", "--seat-queue-length", "3", "--seat-max-wait", "250ms",
		"--wide-seats", "2"); cfg.Seats !=
		(seatq.Config{Seats: 5, QueueLength: 3, MaxWait: 250 * time.Millisecond, WideSeats: 2}) {
		t.Errorf("admission flags over the variables: %+v", cfg.Seats)
	}
	delete(env, "SEARCHD_SEATS")
	delete(env, "SEARCHD_SEAT_QUEUE_LENGTH")
	delete(env, "SEARCHD_SEAT_MAX_WAIT")
	// Wide seats beyond seatq's default seats are taken while the seats
	// are the pool's, sized at start-up (newSeatQueue checks them then).
	if cfg = load(env, false, "--wide-seats", "40"); cfg.Seats.Seats != 0 || cfg.Seats.WideSeats != 40 {
		t.Errorf("--wide-seats 40 with the pool's seats: %+v", cfg.Seats)
	}
	delete(env, "SEARCHD_WIDE_SEATS")
	// The schedule lease is twice the saved-search lease unless set.
	if cfg = load(env, false, "--saved-search-lease", "45s"); cfg.Schedule.Lease != 90*time.Second {
		t.Errorf("schedule lease with a 45s saved-search lease = %s, want 1m30s", cfg.Schedule.Lease)
	}
	if cfg = load(env, false, "--schedule-lease", "2m"); cfg.Schedule.Lease != 2*time.Minute {
		t.Errorf("--schedule-lease 2m = %s", cfg.Schedule.Lease)
	}
	// Authentication: HS256 alone by default; a provider when its issuer
	// is set, the claims as configured; the console's token sign-in off
	// under serve and on under dev.
	if cfg = load(env, false); cfg.Auth.OIDC != nil || cfg.Auth.SignIn != nil || cfg.Auth.TokenSignIn ||
		cfg.Auth.MaxLifetime != 24*time.Hour || cfg.Auth.SessionLifetime != 8*time.Hour {
		t.Errorf("default authentication = %+v, want HS256 alone, 24 h tokens, 8 h sessions, no token sign-in", cfg.Auth)
	}
	oidc := map[string]string{"DATABASE_URL": "postgres://env@localhost/db", "SEARCHD_OIDC_ISSUER": "https://idp.example.com/", "SEARCHD_OIDC_AUDIENCE": "api",
		"SEARCHD_OIDC_CLIENT_ID": "console", "SEARCHD_OIDC_CLIENT_SECRET": "s", "SEARCHD_OIDC_SCOPES": "openid  email",
		"SEARCHD_OIDC_REDIRECT_URL": "https://searchd.example.com/console/oidc/callback", "SEARCHD_CONSOLE_SESSION_LIFETIME": "1h"}
	cfg = load(oidc, false, "--oidc-org-claim", "tenant", "--token-max-lifetime", "2h", "--console-token-sign-in", "true")
	if o := cfg.Auth.OIDC; o == nil || o.Issuer != "https://idp.example.com/" || o.Audience != "api" || o.OrgClaim != "tenant" ||
		cfg.Auth.SignIn == nil || cfg.Auth.SignIn.ClientSecret != "s" || len(cfg.Auth.SignIn.Scopes) != 2 ||
		cfg.Auth.MaxLifetime != 2*time.Hour || cfg.Auth.SessionLifetime != time.Hour || !cfg.Auth.TokenSignIn || cfg.JWTSecret != "" {
		t.Errorf("a provider without a secret = %+v %+v", cfg.Auth, cfg.Auth.OIDC)
	}
	if cfg = load(map[string]string{}, true); !cfg.Auth.TokenSignIn {
		t.Error("dev: token sign-in off, want on")
	}
	if cfg = load(map[string]string{"SEARCHD_CONSOLE_TOKEN_SIGN_IN": "false"}, true); cfg.Auth.TokenSignIn {
		t.Error("dev with SEARCHD_CONSOLE_TOKEN_SIGN_IN=false: token sign-in on")
	}
	cfg = load(map[string]string{"SEARCHD_DEV_DIR": "/env/dir"}, true, "--pg-bin", "/flag/bin")
	if cfg.DevDir != "/env/dir" || cfg.PGBin != "/flag/bin" || cfg.Addr != "127.0.0.1:8080" || cfg.LogFormat != "text" {
		t.Errorf("dev = %+v, want the dir from the variable, the binaries from the flag and dev's defaults", cfg)
	}
}

func TestADatabaseURLFlagMustNotHoldAPassword(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SEARCHD_JWT_SECRET": goodSecret}
	for _, u := range []string{
		"postgres://searchd:hunter2@localhost:5432/searchd",
		"postgres://searchd@localhost:5432/searchd?password=hunter2",
		"host=localhost user=searchd password=hunter2",
	} {
		for _, args := range [][]string{{"serve", "--database-url", u}, {"migrate", "--database-url", u}} {
			h := newHarness(env)
			if code := h.run(args...); code != 2 || !strings.Contains(h.stderr.String(), "--database-url: holds a password") {
				t.Errorf("%s --database-url (password) = %d %q, want 2: a flag with a password is refused", args[0], code, h.stderr.String())
			}
			if strings.Contains(h.stderr.String(), "hunter2") {
				t.Errorf("%s: stderr %q shows the password", args[0], h.stderr.String())
			}
		}
	}
	// In the variable a password is where it belongs.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	serverFlags(fs)
	env["DATABASE_URL"] = "postgres://searchd:hunter2@localhost:5432/searchd"
	if _, err := loadServerConfig(fs, func(k string) string { return env[k] }, false); err != nil {
		t.Errorf("DATABASE_URL with a password: %v, want it accepted", err)
	}
}

func TestMigrateTakesTheDatabaseFromItsFlag(t *testing.T) {
	t.Parallel()
	dbURL := emptyDatabase(t)
	h := newHarness(nil)
	if code := h.run("migrate", "--database-url", dbURL); code != 0 || !strings.Contains(h.stdout.String(), "applied version") {
		t.Errorf("migrate --database-url = %d %q %q, want the migrations applied", code, h.stdout.String(), h.stderr.String())
	}
}

func TestPoolSizeSetting(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDBURL(t)
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	for _, tt := range []struct {
		url   string
		conns int32
		want  int32
	}{
		{dbURL + sep + "pool_max_conns=5", 0, 5},
		{dbURL + sep + "pool_max_conns=5", 3, 3},
		{dbURL, 2, 2},
		{dbURL, 0, defaultDBMaxConns}, // sized for commits, not pgx's max(4, CPUs)
	} {
		pool, err := openPool(context.Background(), serverConfig{DatabaseURL: tt.url, DBMaxConns: tt.conns})
		if err != nil {
			t.Fatal(err)
		}
		if got := pool.Config().MaxConns; got != tt.want {
			t.Errorf("openPool(pool_max_conns in %q, DBMaxConns %d) has MaxConns %d, want %d", tt.url, tt.conns, got, tt.want)
		}
		pool.Close()
	}
}

// TestStatementTimeoutBoundsEveryPoolStatement opens the request pool with
// a 200 ms statement timeout: a statement that runs longer is cancelled by
// PostgreSQL (57014, which the API answers 503), and a shorter one runs.
// With the setting at 0s the pool sets none.
func TestStatementTimeoutBoundsEveryPoolStatement(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDBURL(t)
	ctx := context.Background()
	pool, err := openPool(ctx, serverConfig{DatabaseURL: dbURL, Session: sessionBounds{Statement: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var pgErr *pgconn.PgError
	if _, err := pool.Exec(ctx, `SELECT pg_sleep(2)`); !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Errorf("a 2 s statement under a 200 ms timeout = %v, want 57014 query_canceled", err)
	}
	if _, err := pool.Exec(ctx, `SELECT pg_sleep(0.01)`); err != nil {
		t.Errorf("a 10 ms statement: %v", err)
	}
	none, err := openPool(ctx, serverConfig{DatabaseURL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	var setting string
	if err := none.QueryRow(ctx, `SHOW statement_timeout`).Scan(&setting); err != nil || setting != "0" {
		t.Errorf("statement_timeout with the setting at 0s = %q, %v; want 0", setting, err)
	}
}
