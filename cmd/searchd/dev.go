package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/loop"
	"github.com/searchd/searchd/internal/pgcluster"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
)

// demoOrganization is the organization `searchd dev` creates its demo data
// in and mints its token for. It is fixed, so tokens and ids printed on one
// run stay valid on the next.
var demoOrganization = uuid.MustParse("d0d0d0d0-0000-4000-8000-000000000001")

const (
	// devDatabase is the database dev creates on its local cluster.
	devDatabase = "searchd"
	// devSecretFile, inside the dev directory, keeps the dev JWT secret.
	devSecretFile = "jwt-secret"
	// demoName names the demo saved search; dev finds it again by it.
	demoName = "Demo: PostgreSQL engineer roles"
	// devTokenTTL is the life of the token dev prints.
	devTokenTTL = 24 * time.Hour
	devActor    = "dev"
	// devOperator is the sub of the operator token dev prints.
	devOperator = "dev-operator"
	// devRuntime names the demo organization's runtime credential dev prints.
	devRuntime = "dev-runtime"
)

// dev runs searchd locally with one command: its own PostgreSQL (unless
// DATABASE_URL names one), migrations, demo data, a token, and the server.
func (a *app) dev(ctx context.Context, args []string) error {
	cfg, err := a.loadCommand("dev", devCommand, args)
	if err != nil {
		return err
	}
	logger := newLogger(a.stderr, cfg)
	warnRemovedSettings(logger, a.getenv, cfg.renamed)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// `go run ./cmd/searchd dev &` then `kill $!` kills go run, not this
	// child; without this the server and its cluster would outlive it.
	ctx, stopWatch := exitWithParent(ctx, logger)
	defer stopWatch()

	dir, err := filepath.Abs(cfg.DevDir)
	if err != nil {
		return fmt.Errorf("%s: %w", envDevDir, err)
	}
	stopCluster, err := a.devCluster(ctx, &cfg, dir)
	defer stopCluster(logger) // set even on an error, once the cluster started
	if err != nil {
		return err
	}
	if err := a.migrateUp(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	secret, err := a.devJWTSecret(cfg, dir)
	if err != nil {
		return err
	}

	obs, err := newObservability(ctx, a.getenv)
	if err != nil {
		return err
	}
	defer obs.shutdown(logger)
	st, err := a.openStores(ctx, cfg, logger, obs)
	if err != nil {
		return err
	}
	defer st.pool.Close()
	banner, err := a.devDemo(ctx, st, secret, dir, &cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("%s=%s: cannot listen: %w", envAddr, cfg.Addr, err)
	}
	banner.base = "http://" + dialable(ln.Addr())
	banner.print(a.stdout)
	// The dev secret signs the token above; the server must verify with it.
	cfg.JWTSecret = string(secret)
	return a.runServer(ctx, cfg, ln, st, logger, obs)
}

// devCluster starts dev's own PostgreSQL in dir, with its database, and
// points cfg at it, unless cfg names a database already; the function it
// returns stops the cluster.
func (a *app) devCluster(ctx context.Context, cfg *serverConfig, dir string) (stop func(*slog.Logger), err error) {
	stop = func(*slog.Logger) {}
	var bins pgcluster.Binaries
	if cfg.DatabaseURL == "" {
		// Before anything is created: a missing PostgreSQL leaves no trace.
		if bins, err = pgcluster.FindBinaries(cfg.PGBin); err != nil {
			return stop, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return stop, fmt.Errorf("%s: cannot create %s: %w", envDevDir, dir, err)
	}
	if cfg.DatabaseURL != "" {
		return stop, nil
	}
	cluster, err := pgcluster.Start(ctx, pgcluster.Config{Dir: dir, Binaries: bins})
	if err != nil {
		return stop, err
	}
	stop = func(logger *slog.Logger) {
		if err := cluster.Stop(); err != nil {
			logger.Warn("stopping PostgreSQL", slog.String("error", err.Error()))
		}
	}
	if _, err := cluster.CreateDatabase(ctx, devDatabase); err != nil {
		return stop, err
	}
	cfg.DatabaseURL = cluster.URL(devDatabase)
	how := "started"
	if cluster.Initialized {
		how = "initialized and started"
	}
	fmt.Fprintf(a.stdout, "PostgreSQL %s in %s (log: %s)\n", how, filepath.Join(dir, "data"), cluster.LogPath())
	// The CLI's commands (migrate, runs, sweep...) take the database from
	// DATABASE_URL: this is the one to give them while dev runs.
	fmt.Fprintf(a.stdout, "DATABASE_URL=%s\n", shellQuote(cfg.DatabaseURL))
	return stop, nil
}

// devJWTSecret is the JWT secret cfg sets, or the development one kept in
// dir (generated and stored on first use), with a warning that it is for
// local development only.
func (a *app) devJWTSecret(cfg serverConfig, dir string) ([]byte, error) {
	if cfg.JWTSecret != "" {
		return []byte(cfg.JWTSecret), nil
	}
	path := filepath.Join(dir, devSecretFile)
	s, err := keptSecret(path, "dev secret", 48, false)
	switch {
	case err != nil:
		return nil, err
	case len(s) < auth.MinSecretLen:
		return nil, fmt.Errorf("%s holds fewer than %d bytes; delete it and a new secret is made", path, auth.MinSecretLen)
	}
	fmt.Fprintf(a.stdout, "WARNING: using the development JWT secret in %s; it is for local development only, never for a real deployment\n", path)
	return []byte(s), nil
}

// devBanner is what dev prints once it listens: the demo records, the
// tokens and the commands that use them.
type devBanner struct {
	demo                    *savedsearch.SavedSearch
	job                     *providerjobs.Job
	token, opToken, rtToken string
	providerSecret          string
	dispatching             string
	secretPath              string
	base                    string
}

// devDemo makes the demo records and the tokens the banner shows, signed
// with secret; cfg gains the demo provider's secret.
func (a *app) devDemo(ctx context.Context, st *stores, secret []byte, dir string, cfg *serverConfig) (b devBanner, err error) {
	b.secretPath = filepath.Join(dir, devSecretFile)
	if b.demo, err = demoSavedSearch(ctx, st.savedSearches); err != nil {
		return b, fmt.Errorf("creating the demo saved search: %w", err)
	}
	if b.token, err = auth.SignToken(secret, demoOrganization, devActor, a.now(), devTokenTTL); err != nil {
		return b, err
	}
	if b.opToken, err = auth.SignOperatorToken(secret, uuid.Nil, devOperator, a.now(), devTokenTTL); err != nil {
		return b, err
	}
	if b.rtToken, err = auth.SignRuntimeToken(secret, demoOrganization, devRuntime, a.now(), devTokenTTL); err != nil {
		return b, err
	}
	b.dispatching = "off: set " + envRuntimeURL + " and " + envRuntimeSecret + " to hand every admitted Run to a runtime (docs/runtime.md)"
	if cfg.Dispatch.URL != "" {
		b.dispatching = "on: every admitted Run is POSTed to " + envRuntimeURL + ", signed with " + envRuntimeSecret
	}
	if b.providerSecret, err = a.demoProviderSecret(dir, cfg); err != nil {
		return b, err
	}
	if b.job, err = demoProviderJob(ctx, st); err != nil {
		return b, fmt.Errorf("registering the demo provider job: %w", err)
	}
	return b, nil
}

// print writes the banner to w.
func (b devBanner) print(w io.Writer) {
	demo, job, base, tok := b.demo, b.job, b.base, b.token
	fmt.Fprintf(w, `
organization  %s
saved search  %s (%s)
token         %s
              (valid %s; make another with: SEARCHD_JWT_SECRET="$(cat %s)" bin/searchd token --org %s
              after make build, which builds bin/searchd)

Start a Run on the demo saved search:

curl -sS -X POST '%s/v1/saved-searches/%s/start' \
  -H 'Authorization: Bearer %s' \
  -H "Idempotency-Key: $(date +%%s%%N)" \
  -H 'Content-Type: application/json' \
  -d '{"max_results": 10}'

Call back as the demo provider %q about its job %s (provider job id %s), signed
with the demo secret (Standard Webhooks: HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>"):

body='{"job_id":"%s","status":"succeeded","result":{"hits":3}}'
id="evt-$(date +%%s%%N)"; ts="$(date +%%s)"
sig="$(printf '%%s.%%s.%%s' "$id" "$ts" "$body" | openssl dgst -sha256 -hmac '%s' -binary | base64)"
curl -sS -X POST '%s%s' \
  -H "webhook-id: $id" -H "webhook-timestamp: $ts" -H "webhook-signature: v1,$sig" \
  -H 'Content-Type: application/json' -d "$body"

Dispatch to a runtime: %s.
A runtime reports a Run's status with its own credential (bin/searchd token --runtime --org %s --sub NAME):

curl -sS -X PUT '%s/v1/runs/<run id>/status' \
  -H 'Authorization: Bearer %s' \
  -H 'Content-Type: application/json' -d '{"status":"succeeded"}'

Console: %s/console/ (sign in with the token above; an operator signs in with
              %s)

Serving on %s (Ctrl-C stops the server and PostgreSQL; so does the end of the process that started dev)
`, demoOrganization, demo.ID, demo.Name, tok, devTokenTTL, b.secretPath, demoOrganization,
		base, demo.ID, tok,
		demoProvider, job.ID, job.ProviderJobID, job.ProviderJobID, b.providerSecret, base, "/v1/callbacks/"+demoProvider+"/jobs/"+job.ID.String(),
		b.dispatching, demoOrganization, base, b.rtToken,
		base, b.opToken, base)
}

// keptSecret returns the secret kept in path, trimmed. When path is
// missing (or empty, with renewEmpty) it stores n random bytes there, in
// base64, and returns them; what names the secret in the error.
func keptSecret(path, what string, n int, renewEmpty bool) (string, error) {
	b, err := os.ReadFile(path)
	switch s := strings.TrimSpace(string(b)); {
	case err == nil && (s != "" || !renewEmpty):
		return s, nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	raw := make([]byte, n)
	_, _ = rand.Read(raw) // never fails
	s := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("storing the %s: %w", what, err)
	}
	return s, nil
}

// demoSavedSearch returns the demo organization's demo saved search,
// creating it on the first run (and again if it was archived).
func demoSavedSearch(ctx context.Context, store *savedsearch.Store) (*savedsearch.SavedSearch, error) {
	cursor := ""
	for {
		items, next, err := store.List(ctx, demoOrganization, savedsearch.ListParams{Limit: savedsearch.MaxListLimit, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for i := range items {
			if items[i].Name == demoName {
				return store.Get(ctx, demoOrganization, items[i].ID)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return store.Create(ctx, demoOrganization, savedsearch.CreateParams{
		Name: demoName,
		Brief: savedsearch.Brief{
			Query:   "senior PostgreSQL engineer",
			Filters: map[string]any{"location": "Berlin", "remote": true},
		},
		Baseline: savedsearch.Baseline{Items: []string{"https://jobs.example.com/postings/1001"}},
		Actor:    devActor,
	})
}

// dialable returns addr as a client can dial it: an unspecified listen
// address (":8080", "[::]:8080") becomes loopback.
func dialable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// The demo provider dev configures, and the job it registers for it.
const (
	demoProvider      = "demo"
	demoProviderJobID = "demo-job-1"
	demoRunKey        = "dev-demo-provider-run"
)

// demoProviderSecret returns the secret of the demo provider and adds it
// to cfg's provider secrets, unless SEARCHD_PROVIDER_SECRETS names the
// demo provider already: generated on first use and kept in dir, printable
// so the printed openssl command can use it as it is (a raw-bytes secret).
func (a *app) demoProviderSecret(dir string, cfg *serverConfig) (string, error) {
	if s, ok := cfg.ProviderSecrets[demoProvider]; ok {
		return string(s), nil
	}
	s, err := keptSecret(filepath.Join(dir, "provider-secret-"+demoProvider), "demo provider secret", 32, true)
	if err != nil {
		return "", err
	}
	if cfg.ProviderSecrets == nil {
		cfg.ProviderSecrets = map[string][]byte{}
	}
	cfg.ProviderSecrets[demoProvider] = []byte(s)
	return s, nil
}

// demoProviderJob returns the demo provider's job, registering it (for a
// demo Run of its own) on the first run; a later run finds both again.
func demoProviderJob(ctx context.Context, st *stores) (*providerjobs.Job, error) {
	name := "dev demo provider run"
	run, _, err := st.runs.Admit(ctx, runs.AdmitParams{
		OrganizationID: demoOrganization,
		Kind:           runs.KindCapability,
		StartKey:       runs.DirectStartKey(demoRunKey),
		RequestHash:    "dev-demo",
		Name:           &name,
	})
	if err != nil {
		return nil, err
	}
	job, _, err := st.providerJobs.Register(ctx, demoOrganization,
		providerjobs.RegisterParams{RunID: run.ID, Provider: demoProvider, ProviderJobID: demoProviderJobID})
	return job, err
}

// parentPoll is how often dev checks that the process that started it is
// still there.
const parentPoll = 250 * time.Millisecond

// exitWithParent returns a context that ends when ctx does or when the
// process that started this one exits (this process is then re-parented,
// and its parent pid changes), so dev never outlives what started it.
func exitWithParent(ctx context.Context, logger *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	parent := os.Getppid()
	go loop.Loop{Interval: parentPoll}.Run(ctx, func(context.Context) (loop.Next, error) {
		if os.Getppid() != parent {
			logger.Info("the process that started dev exited; stopping", slog.Int("parent_pid", parent))
			cancel()
		}
		return loop.Next{}, nil
	})
	return ctx, cancel
}

// shellQuote returns s quoted for a POSIX shell, so a printed assignment
// can be pasted as it is.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
