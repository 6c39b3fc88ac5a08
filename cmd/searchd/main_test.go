package main

import (
	"context"
	"flag"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/testkit/oidctest"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.AtExit(oidctest.Cleanup)
	pgtest.MainNoLeaks(m)
}

const goodSecret = "0123456789abcdef0123456789abcdef-test"

// harness runs the command in process with its own environment.
type harness struct {
	app    *app
	stdout *pgtest.SyncBuffer
	stderr *pgtest.SyncBuffer
	addrs  chan string
}

func newHarness(env map[string]string) *harness {
	h := &harness{stdout: &pgtest.SyncBuffer{}, stderr: &pgtest.SyncBuffer{}, addrs: make(chan string, 1)}
	h.app = &app{
		stdout: h.stdout,
		stderr: h.stderr,
		getenv: func(k string) string { return env[k] },
		now:    time.Now,
		ready:  func(addr string) { h.addrs <- addr },
	}
	return h
}

// newDB returns the URL of a migrated database of the test's own and a
// pool on it, closed when the test ends.
func newDB(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	dbURL := pgtest.NewDBURL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return dbURL, pool
}

func (h *harness) run(args ...string) int {
	return h.app.run(context.Background(), args)
}

// start runs the command args (serve or dev, with their flags) in process
// on h, and returns once it listens, with its address. stop stands for the
// signal: it cancels the command's context and returns its exit status,
// failing the test when it takes more than a minute. The test's cleanup
// calls stop too, so nothing the command started outlives the test (which
// TestMain's leak check holds the package to).
func (h *harness) start(t *testing.T, args ...string) (addr string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() { exit <- h.app.run(ctx, args) }()
	stop = sync.OnceValue(func() int {
		cancel()
		select {
		case code := <-exit:
			return code
		case <-time.After(time.Minute):
			t.Errorf("%s did not stop within a minute: %s", args[0], h.stderr.String())
			return -1
		}
	})
	t.Cleanup(func() { stop() })
	select {
	case addr = <-h.addrs:
		return addr, stop
	case code := <-exit:
		exit <- code // for stop
		t.Fatalf("%s exited %d: %s%s", args[0], code, h.stdout.String(), h.stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not start listening", args[0])
	}
	return "", nil
}

func TestConfigErrorsNameTheSetting(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"DATABASE_URL":       "postgres://searchd@localhost:5432/searchd",
		"SEARCHD_JWT_SECRET": goodSecret,
	}
	with := func(kv ...string) map[string]string {
		env := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return env
	}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string // substrings of stderr
	}{
		{"nothing set", map[string]string{}, []string{"serve"},
			[]string{"DATABASE_URL: is required", "SEARCHD_JWT_SECRET: is required"}},
		{"short secret", with("SEARCHD_JWT_SECRET", "short"), []string{"serve"},
			[]string{"SEARCHD_JWT_SECRET: auth: Config.Secret is 5 bytes long; it must be at least 32"}},
		{"address without port", with("SEARCHD_ADDR", "localhost"), []string{"serve"},
			[]string{`SEARCHD_ADDR: "localhost" is not a host:port address`}},
		{"port out of range", with("SEARCHD_ADDR", ":70000"), []string{"serve"},
			[]string{`SEARCHD_ADDR: port "70000" is not a number from 0 to 65535`}},
		{"flag named, not the variable", with(), []string{"serve", "--addr", "nope"},
			[]string{`--addr: "nope" is not a host:port address`}},
		{"grace not a duration", with("SEARCHD_SHUTDOWN_GRACE", "ten"), []string{"serve"},
			[]string{`SEARCHD_SHUTDOWN_GRACE: "ten" is not a duration`}},
		{"negative grace", with("SEARCHD_SHUTDOWN_GRACE", "-1s"), []string{"serve"},
			[]string{"SEARCHD_SHUTDOWN_GRACE: -1s is out of range"}},
		{"body limit too small", with("SEARCHD_MAX_BODY_BYTES", "12"), []string{"serve"},
			[]string{"SEARCHD_MAX_BODY_BYTES: 12 is out of range: from 1024"}},
		{"body limit not a number", with("SEARCHD_MAX_BODY_BYTES", "8MiB"), []string{"serve"},
			[]string{`SEARCHD_MAX_BODY_BYTES: "8MiB" is not a whole number of bytes`}},
		{"log level", with("SEARCHD_LOG_LEVEL", "loud"), []string{"serve"},
			[]string{`SEARCHD_LOG_LEVEL: "loud" is not a level`}},
		{"log format", with("SEARCHD_LOG_FORMAT", "xml"), []string{"serve"},
			[]string{`SEARCHD_LOG_FORMAT: "xml" is not a log format`}},
		{"database URL, password kept quiet", with("DATABASE_URL", "postgres://u:hunter2@db:notaport/x"), []string{"serve"},
			[]string{"DATABASE_URL: is not a valid PostgreSQL connection string"}},
		{"dev checks what it is given", with("SEARCHD_JWT_SECRET", "short", "SEARCHD_ADDR", "x"), []string{"dev"},
			[]string{"SEARCHD_JWT_SECRET: auth: Config.Secret is 5 bytes", `SEARCHD_ADDR: "x"`}},
		{"migrate without a database", map[string]string{}, []string{"migrate"},
			[]string{"DATABASE_URL: is required"}},
		{"unknown flag", with(), []string{"serve", "--port", "1"},
			[]string{"flag provided but not defined: -port"}},
		{"stray argument", with(), []string{"migrate", "now"},
			[]string{`unexpected argument "now"`}},
		{"unknown command", with(), []string{"server"},
			[]string{`unknown command "server"`}},
		{"token without org", with(), []string{"token"},
			[]string{"--org: is required"}},
		{"token with a bad org", with(), []string{"token", "--org", "acme"},
			[]string{`--org: "acme" is not a UUID`}},
		{"token with the nil org", with(), []string{"token", "--org", uuid.Nil.String()},
			[]string{"--org: is the nil UUID"}},
		{"token with a bad ttl", with(), []string{"token", "--org", uuid.NewString(), "--ttl", "-1h"},
			[]string{"--ttl: -1h0m0s is out of range"}},
		{"token without a secret", map[string]string{}, []string{"token", "--org", uuid.NewString()},
			[]string{"SEARCHD_JWT_SECRET: is required"}},
		{"token longer than the server accepts", with(), []string{"token", "--org", uuid.NewString(), "--ttl", "25h"},
			[]string{"--ttl: 25h0m0s is out of range: more than 0s, at most 24h0m0s, the longest lifetime the server accepts (SEARCHD_TOKEN_MAX_LIFETIME)"}},
		{"token lifetime setting", with("SEARCHD_TOKEN_MAX_LIFETIME", "forever"), []string{"token", "--org", uuid.NewString()},
			[]string{`SEARCHD_TOKEN_MAX_LIFETIME: "forever" is not a duration (write it like 8h or 30m)`}},
		{"token lifetime out of range", with("SEARCHD_TOKEN_MAX_LIFETIME", "800h"), []string{"serve"},
			[]string{"SEARCHD_TOKEN_MAX_LIFETIME: 800h0m0s is out of range: from 1m0s to 720h0m0s"}},
		{"issuer over http", with("SEARCHD_OIDC_ISSUER", "http://idp.example.com", "SEARCHD_OIDC_AUDIENCE", "a"), []string{"serve"},
			[]string{`SEARCHD_OIDC_ISSUER: "http://idp.example.com" must be https (http only on a loopback host, for tests)`}},
		{"issuer without audience", with("SEARCHD_OIDC_ISSUER", "https://idp.example.com"), []string{"serve"},
			[]string{"SEARCHD_OIDC_AUDIENCE: is required with SEARCHD_OIDC_ISSUER"}},
		{"audience without issuer", with("SEARCHD_OIDC_AUDIENCE", "a"), []string{"serve"},
			[]string{"SEARCHD_OIDC_AUDIENCE: is set without SEARCHD_OIDC_ISSUER"}},
		{"a claim name with a space", with("SEARCHD_OIDC_ISSUER", "https://idp.example.com", "SEARCHD_OIDC_AUDIENCE", "a",
			"SEARCHD_OIDC_ORG_CLAIM", "org id"), []string{"serve"}, []string{`SEARCHD_OIDC_ORG_CLAIM: "org id" is not a claim name`}},
		{"a client without a provider", with("SEARCHD_OIDC_CLIENT_ID", "c", "SEARCHD_OIDC_REDIRECT_URL", "https://s.example.com/console/oidc/callback"),
			[]string{"serve"}, []string{"SEARCHD_OIDC_CLIENT_ID: needs SEARCHD_OIDC_ISSUER"}},
		{"a client without a redirect", with("SEARCHD_OIDC_ISSUER", "https://idp.example.com", "SEARCHD_OIDC_AUDIENCE", "a",
			"SEARCHD_OIDC_CLIENT_ID", "c"), []string{"serve"}, []string{"SEARCHD_OIDC_REDIRECT_URL: is required"}},
		{"session lifetime", with("SEARCHD_CONSOLE_SESSION_LIFETIME", "30s"), []string{"serve"},
			[]string{"SEARCHD_CONSOLE_SESSION_LIFETIME: 30s is out of range: from 1m0s to 168h0m0s"}},
		{"token sign-in not a boolean", with("SEARCHD_CONSOLE_TOKEN_SIGN_IN", "yes please"), []string{"serve"},
			[]string{`SEARCHD_CONSOLE_TOKEN_SIGN_IN: "yes please" is not true or false`}},
	}
	for _, tt := range tests {
		h := newHarness(tt.env)
		code := h.run(tt.args...)
		stderr := h.stderr.String()
		if code != 2 {
			t.Errorf("%s: exit %d, want 2 (stderr %q)", tt.name, code, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q does not say %q", tt.name, stderr, w)
			}
		}
		if strings.Contains(stderr, "hunter2") || strings.Contains(stderr, "goroutine") {
			t.Errorf("%s: stderr %q shows a password or a stack", tt.name, stderr)
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	h := newHarness(nil)
	if code := h.run("help"); code != 0 || !strings.Contains(h.stdout.String(), "SEARCHD_JWT_SECRET") {
		t.Errorf("help = %d, %q", code, h.stdout.String())
	}
	if code := newHarness(nil).run(); code != 2 {
		t.Errorf("no command = %d, want 2", code)
	}
}

func TestTokenPrintsAVerifiableToken(t *testing.T) {
	t.Parallel()
	org := uuid.New()
	h := newHarness(map[string]string{"SEARCHD_JWT_SECRET": goodSecret})
	now := time.Now().Truncate(time.Second)
	h.app.now = func() time.Time { return now }
	if code := h.run("token", "--org", org.String(), "--sub", "alice", "--ttl", "2h"); code != 0 {
		t.Fatalf("token = %d, stderr %q", code, h.stderr.String())
	}
	out := h.stdout.String()
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("token printed %q, want one line", out)
	}
	var claims auth.Claims
	tok, err := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired()).
		ParseWithClaims(strings.TrimSpace(out), &claims, func(*jwt.Token) (any, error) { return []byte(goodSecret), nil })
	if err != nil || !tok.Valid {
		t.Fatalf("parsing the printed token: %v", err)
	}
	if claims.OrgID != org.String() || claims.Subject != "alice" {
		t.Errorf("claims org_id %q sub %q, want %s and alice", claims.OrgID, claims.Subject, org)
	}
	if got := claims.ExpiresAt.Time; !got.Equal(now.Add(2 * time.Hour)) {
		t.Errorf("exp = %s, want %s", got, now.Add(2*time.Hour))
	}
	// Without --sub there is no sub claim; the default ttl is an hour.
	h = newHarness(map[string]string{"SEARCHD_JWT_SECRET": goodSecret})
	h.app.now = func() time.Time { return now }
	h.run("token", "--org", org.String())
	claims = auth.Claims{}
	if _, err := jwt.NewParser().ParseWithClaims(strings.TrimSpace(h.stdout.String()), &claims,
		func(*jwt.Token) (any, error) { return []byte(goodSecret), nil }); err != nil {
		t.Fatal(err)
	}
	if claims.Subject != "" || !claims.ExpiresAt.Time.Equal(now.Add(time.Hour)) {
		t.Errorf("default token: sub %q exp %s, want no sub and an hour", claims.Subject, claims.ExpiresAt.Time)
	}
}

// serverFlags registers the flags of serve's settings on fs, and its
// --help.
func serverFlags(fs *flag.FlagSet) { registerOptions(fs, serveCommand) }

// loadServerConfig reads the settings of serve, or of dev when dev is
// set, from the flags on fs and getenv, as [app.loadCommand] does.
func loadServerConfig(fs *flag.FlagSet, getenv func(string) string, dev bool) (serverConfig, error) {
	c := cmdServe
	if dev {
		c = cmdDev
	}
	cfg, problems := loadSettings(fs, getenv, c)
	if len(problems) > 0 {
		return cfg, invalid(problems)
	}
	return cfg, nil
}
