package main

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
)

// seedInboxJob registers an acme job for a new Run on the database at
// dbURL and returns the service and the job.
func seedInboxJob(t *testing.T, pool *pgxpool.Pool) (*providerjobs.Service, *providerjobs.Job) {
	t.Helper()
	ctx := context.Background()
	org := uuid.New()
	name := "capability"
	run, _, err := runs.NewStore(pool, runs.Config{}).Admit(ctx, runs.AdmitParams{
		OrganizationID: org, Kind: runs.KindCapability, StartKey: runs.DirectStartKey(uuid.NewString()),
		RequestHash: "seed", Name: &name})
	if err != nil {
		t.Fatal(err)
	}
	svc := providerjobs.New(pool, idempotency.NewService(pool, idempotency.Config{}), providerjobs.Config{})
	job, _, err := svc.Register(ctx, org, providerjobs.RegisterParams{RunID: run.ID, Provider: "acme", ProviderJobID: "pj-1"})
	if err != nil {
		t.Fatal(err)
	}
	return svc, job
}

// TestSessionBoundsEndAStalledTransaction is point 7 of issue 11 at the
// pool: every session of serve carries the bounds as server settings, and
// a session left idle inside a transaction (a replica stopped mid-apply)
// is ended by PostgreSQL, releasing its locks.
func TestSessionBoundsEndAStalledTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := openPool(ctx, serverConfig{DatabaseURL: pgtest.NewDBURL(t),
		Session: sessionBounds{IdleInTransaction: 500 * time.Millisecond, Lock: 2 * time.Second, Statement: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for name, want := range map[string]string{
		"idle_in_transaction_session_timeout": "500ms", "lock_timeout": "2s", "statement_timeout": "3s"} {
		var got string
		if err := pool.QueryRow(ctx, "SHOW "+name).Scan(&got); err != nil || got != want {
			t.Errorf("SHOW %s = %q, %v; want %q", name, got, err, want)
		}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // stalled inside the transaction
	if _, err := tx.Exec(ctx, `SELECT 1`); err == nil {
		t.Error("a session idle in its transaction past the bound still ran a statement; want it ended by the server")
	}
	_ = tx.Rollback(ctx)
	// The defaults are seconds, and every setting names itself in errors.
	h := newHarness(map[string]string{})
	fs := h.app.flagSet("serve", serveCommand)
	base := map[string]string{envDatabaseURL: "postgres://searchd@localhost:5432/searchd", envJWTSecret: goodSecret}
	cfg, problems := loadSettings(fs, func(k string) string { return base[k] }, cmdServe)
	if sb := cfg.Session; len(problems) != 0 || sb != (sessionBounds{5 * time.Second, 10 * time.Second, 15 * time.Second}) {
		t.Errorf("default bounds = %+v (%v), want 5s, 10s, 15s", sb, problems)
	}
	bad := map[string]string{envIdleInTransactionTimeout: "2h", envLockTimeout: "soon", envProviderWebhookLease: "0s", envApplierBatch: "0"}
	_, problems = loadSettings(fs, func(k string) string { return cmp.Or(bad[k], base[k]) }, cmdServe)
	if msg := strings.Join(problems, "\n"); len(problems) != 4 || !strings.Contains(msg, envIdleInTransactionTimeout+": 2h0m0s is out of range") ||
		!strings.Contains(msg, envLockTimeout+`: "soon" is not a duration`) || !strings.Contains(msg, envProviderWebhookLease+": 0s is out of range") ||
		!strings.Contains(msg, envApplierBatch+": 0 is out of range") {
		t.Errorf("problems = %q, want one per setting, naming it", msg)
	}
}

// TestServeRunsTheApplier: serve applies a stored delivery its handler
// never finished (here: an arrival written straight into the inbox, its
// lease passed), and counts it in its metrics.
func TestServeRunsTheApplier(t *testing.T) {
	t.Parallel()
	dbURL, pool := newDB(t)
	_, job := seedInboxJob(t, pool)
	if _, err := pool.Exec(context.Background(), `
INSERT INTO agent.provider_inbox (id, provider, delivery_id, path_job_id, job_id, organization_id, request_hash,
	body_job_id, body_status, received_at, lease_expires_at, attempts)
VALUES ($1, 'acme', 'd-left', $2, $3, $4, repeat('a', 64), 'pj-1', 'succeeded', now(), now() - interval '1 second', 1)`,
		uuid.New(), job.ID.String(), job.ID, job.OrganizationID); err != nil {
		t.Fatal(err)
	}
	h := newHarness(map[string]string{
		"DATABASE_URL": dbURL, "SEARCHD_JWT_SECRET": goodSecret, "SEARCHD_ADDR": "127.0.0.1:0",
		envApplierInterval: "100ms", envProviderWebhookLease: "2s", "SEARCHD_SWEEP_INTERVAL": "0s",
	})
	addr, _ := h.start(t, "serve")
	deadline := time.Now().Add(15 * time.Second)
	var version int64
	for time.Now().Before(deadline) {
		if err := pool.QueryRow(context.Background(), `SELECT version FROM agent.provider_jobs WHERE id = $1`, job.ID).Scan(&version); err != nil {
			t.Fatal(err)
		}
		if version == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if version != 2 {
		t.Fatalf("job version = %d after 15 s, want 2: serve's applier did not apply the arrival", version)
	}
	var status, by string
	if err := pool.QueryRow(context.Background(), `SELECT status, applied_by FROM agent.provider_inbox WHERE delivery_id = 'd-left'`).Scan(&status, &by); err != nil ||
		status != "applied" || by != "applier" {
		t.Errorf("arrival = %s by %s, %v; want applied by the applier", status, by, err)
	}
	page := getText(t, "http://"+addr+"/metrics")
	for _, line := range []string{`searchd_inbox_applied_total{by="applier",provider="acme"} 1`, "searchd_inbox_pending 0"} {
		if !strings.Contains(page, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
}

// TestInboxShowAndList: an operator reads an arrival and its copies, and
// never the delivery's result.
func TestInboxShowAndList(t *testing.T) {
	t.Parallel()
	dbURL, pool := newDB(t)
	svc, job := seedInboxJob(t, pool)
	body := []byte(`{"job_id":"pj-1","status":"succeeded","result":{"secret_sauce":"customer data"}}`)
	d := providerjobs.Delivery{Provider: "acme", JobID: job.ID.String(), DeliveryID: "d-1", Body: body,
		Update: providerjobs.Update{ProviderJobID: "pj-1", Status: providerjobs.StatusSucceeded,
			Result: json.RawMessage(`{"secret_sauce":"customer data"}`)}}
	for range 3 {
		if _, err := svc.Receive(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"DATABASE_URL": dbURL}
	h := newHarness(env)
	if code := h.run("inbox", "show", "--provider", "acme", "--delivery-id", "d-1"); code != 0 {
		t.Fatalf("inbox show = %d: %s", code, h.stderr.String())
	}
	out := h.stdout.String()
	for _, want := range []string{`delivery id   "d-1"`, "applied by the handler", "2 duplicates", job.ID.String(), "result 33 bytes"} {
		if !strings.Contains(out, want) {
			t.Errorf("inbox show printed %q, want it to hold %q", out, want)
		}
	}
	h = newHarness(env)
	if code := h.run("inbox", "list", "--status", "applied", "--json"); code != 0 {
		t.Fatalf("inbox list = %d: %s", code, h.stderr.String())
	}
	var list []arrivalJSON
	if err := json.Unmarshal([]byte(h.stdout.String()), &list); err != nil || len(list) != 1 || list[0].DeliveryID != "d-1" || list[0].AppliedBy != "handler" {
		t.Errorf("inbox list --json = %s (%v), want the one applied arrival", h.stdout.String(), err)
	}
	for _, h := range []*harness{h} {
		if strings.Contains(h.stdout.String(), "customer data") || strings.Contains(out, "customer data") {
			t.Error("the inbox commands printed the delivery's result")
		}
	}
	h = newHarness(env)
	if code := h.run("inbox", "list", "--status", "lost", "--limit", "0"); code != 2 ||
		!strings.Contains(h.stderr.String(), "--status") || !strings.Contains(h.stderr.String(), "--limit") {
		t.Errorf("inbox list with bad flags = %d %q, want 2 naming both", code, h.stderr.String())
	}
	h = newHarness(env)
	if code := h.run("inbox", "show", "--provider", "acme", "--delivery-id", "nope"); code != 1 || !strings.Contains(h.stderr.String(), "no arrival") {
		t.Errorf("inbox show of an unknown delivery = %d %q", code, h.stderr.String())
	}
}
