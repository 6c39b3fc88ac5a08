package main

import (
	"flag"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/readiness"
	"github.com/searchd/searchd/internal/telemetry"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestParseProviderSecrets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value    string
		want     map[string]string
		problems []string // substrings, one per problem, in order
	}{
		{"", map[string]string{}, nil},
		{"   ", map[string]string{}, nil},
		{"acme=secret1,other=secret2", map[string]string{"acme": "secret1", "other": "secret2"}, nil},
		{" acme = s1 , other.vendor=s2 ", map[string]string{"acme": "s1", "other.vendor": "s2"}, nil},
		{"acme=YmFzZTY0==", map[string]string{"acme": "YmFzZTY0=="}, nil},
		// Standard Webhooks secrets are their decoded key.
		{"acme=whsec_c2VjcmV0LWtleQ==", map[string]string{"acme": "secret-key"}, nil},
		{"acme=whsec_c2VjcmV0LWtleQ==,other=whsec", map[string]string{"acme": "secret-key", "other": "whsec"}, nil},
		{"acme=whsec_not base64!", nil, []string{`entry 1: the secret of provider "acme" starts with "whsec_" but the rest is not standard base64`}},
		{"acme=whsec_", nil, []string{`entry 1: the secret of provider "acme" is "whsec_" and nothing else`}},
		{"acme", nil, []string{`entry 1 has no "="`}},
		{"acme=s,", nil, []string{"entry 2 is empty"}},
		{"Acme=s", nil, []string{`entry 1: "Acme" is not a provider name`}},
		{"=s", nil, []string{`entry 1: "" is not a provider name`}},
		{"acme/x=s", nil, []string{`entry 1: "acme/x" is not a provider name`}},
		{"acme=", nil, []string{`entry 1: the secret of provider "acme" is empty`}},
		{"acme= ", nil, []string{`entry 1: the secret of provider "acme" is empty`}},
		{"acme=a,acme=b", nil, []string{`entry 2: provider "acme" appears more than once`}},
		{"acme,,bad name=x,ok=y", nil, []string{"entry 1 has no", "entry 2 is empty", "entry 3: \"bad name\""}},
	}
	for _, tt := range tests {
		got, problems := parseProviderSecrets(tt.value)
		if len(problems) != len(tt.problems) {
			t.Errorf("parseProviderSecrets(%q) problems = %q, want %d", tt.value, problems, len(tt.problems))
			continue
		}
		for i, p := range problems {
			if !strings.Contains(p, tt.problems[i]) {
				t.Errorf("parseProviderSecrets(%q) problem %d = %q, want it to say %q", tt.value, i, p, tt.problems[i])
			}
		}
		if tt.problems != nil {
			continue
		}
		if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(tt.want))) {
			t.Errorf("parseProviderSecrets(%q) = providers %v, want %v", tt.value, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(tt.want)))
			continue
		}
		for name, secret := range tt.want {
			if string(got[name]) != secret {
				t.Errorf("parseProviderSecrets(%q)[%q] is wrong", tt.value, name)
			}
		}
	}
}

func TestProviderSecretsErrorsNameTheSettingAndHideTheSecrets(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":             "postgres://searchd@localhost:5432/searchd",
		"SEARCHD_JWT_SECRET":       goodSecret,
		"SEARCHD_PROVIDER_SECRETS": "Acme=hunter2,other=",
	}
	h := newHarness(env)
	if code := h.run("serve"); code != 2 {
		t.Fatalf("serve with bad provider secrets = %d, want 2", code)
	}
	stderr := h.stderr.String()
	for _, want := range []string{
		`SEARCHD_PROVIDER_SECRETS: entry 1: "Acme" is not a provider name`,
		`SEARCHD_PROVIDER_SECRETS: entry 2: the secret of provider "other" is empty`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not say %q", stderr, want)
		}
	}
	if strings.Contains(stderr, "hunter2") {
		t.Errorf("stderr %q shows a secret", stderr)
	}

	// There is no flag: a flag's value is in the process list, for every
	// local user to read.
	h = newHarness(env)
	if code := h.run("serve", "--provider-secrets", "acme=hunter2"); code != 2 ||
		!strings.Contains(h.stderr.String(), "flag provided but not defined: -provider-secrets") {
		t.Errorf("serve --provider-secrets = %d %q, want 2: no such flag", code, h.stderr.String())
	}
}

func TestServeWiresProviderCallbacks(t *testing.T) {
	t.Parallel()
	ts := serveAPI(t, pgtest.NewDB(t), serveConfig(t, map[string]string{
		"DATABASE_URL":             "postgres://searchd@localhost:5432/searchd",
		"SEARCHD_JWT_SECRET":       goodSecret,
		"SEARCHD_PROVIDER_SECRETS": "acme=s3cret",
	}))

	body := `{"job_id": "j-1", "status": "running"}`
	post := func(secret string) (int, string) {
		// Standard Webhooks, signed by its reference library with the
		// configured secret's raw bytes.
		wh, err := standardwebhooks.NewWebhookRaw([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		sig, err := wh.Sign("d-1", now, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		hr, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/callbacks/acme/jobs/"+uuid.NewString(), strings.NewReader(body))
		hr.Header.Set("webhook-id", "d-1")
		hr.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		hr.Header.Set("webhook-signature", sig)
		res, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if status, answer := post("s3cret"); status != http.StatusOK || !strings.Contains(answer, `"reason":"unknown_job"`) {
		t.Errorf("a callback signed with the configured secret = %d %s, want 200 dropped unknown_job", status, answer)
	}
	if status, _ := post("another"); status != http.StatusUnauthorized {
		t.Errorf("a callback signed with another secret = %d, want 401", status)
	}
}

// serveConfig is the configuration serve loads from env alone.
func serveConfig(t *testing.T, env map[string]string) serverConfig {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	serverFlags(fs)
	cfg, err := loadServerConfig(fs, func(k string) string { return env[k] }, false)
	if err != nil {
		t.Fatalf("loadServerConfig: %v", err)
	}
	return cfg
}

// serveAPI serves, until the test ends, the API serve would build from
// cfg on pool, with the verifier it would build (no claim listener, no
// background loops, /readyz checked on the pool per probe).
func serveAPI(t *testing.T, pool *pgxpool.Pool, cfg serverConfig) *httptest.Server {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	obs := observability{metrics: telemetry.NewMetrics()}
	queue, err := newSeatQueue(cfg.Seats, pool, obs.metrics)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := newVerifier(t.Context(), cfg)
	if err != nil {
		t.Fatalf("newVerifier: %v", err)
	}
	s := server{st: newStores(pool, nil, keyset.Key{}, cfg, logger, obs), cfg: cfg, logger: logger, obs: obs, queue: queue}
	srv, err := s.api(verifier, nil, readiness.Pool(pool), nil)
	if err != nil {
		t.Fatalf("api: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}
