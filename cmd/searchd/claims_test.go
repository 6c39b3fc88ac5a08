package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/tools"
)

const startScope = idempotency.ScopeSavedSearchStart

// claimsBundle is a migrated database with the plane on it, and the
// environment the claims command needs to reach it.
type claimsBundle struct {
	pool  *pgxpool.Pool
	plane *idempotency.Service
	env   map[string]string
	org   uuid.UUID
}

func claimsSetup(t *testing.T) *claimsBundle {
	t.Helper()
	dbURL, pool := newDB(t)
	return &claimsBundle{
		pool:  pool,
		plane: idempotency.NewService(pool, idempotency.Config{}),
		env:   map[string]string{"DATABASE_URL": dbURL},
		org:   uuid.New(),
	}
}

// hold claims key as a worker would, with the given lease.
func (b *claimsBundle) hold(t *testing.T, key string, lease time.Duration) *idempotency.Claim {
	t.Helper()
	out, err := b.plane.Claim(context.Background(), b.org, startScope, key, "hash-"+key, lease)
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim(%q) = %v, %v; want claimed", key, out.Kind, err)
	}
	return out.Claim
}

func (b *claimsBundle) row(t *testing.T, key string) *idempotency.Record {
	t.Helper()
	rec, err := b.plane.Repository().Get(context.Background(), b.org, startScope, key)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func (b *claimsBundle) run(args ...string) *harness {
	h := newHarness(b.env)
	h.run(append(args, "--org", b.org.String(), "--scope", startScope)...)
	return h
}

func TestClaimsShowPrintsAProcessingClaim(t *testing.T) {
	t.Parallel()
	b := claimsSetup(t)
	claim := b.hold(t, "k", 30*time.Second)

	h := b.run("claims", "show", "--key", "k")
	out := h.stdout.String()
	for _, want := range []string{
		"claim         " + claim.ID.String(),
		"status        processing",
		"request hash  hash-k",
		"lease until   " + claim.LeaseExpiresAt.UTC().Format(time.RFC3339) + ", live: passes in ",
		"retain until  " + claim.RetainUntil.UTC().Format(time.RFC3339) + ", retained: ",
		"resource      none",
		"response      none",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("claims show printed\n%s\nwithout %q (stderr %q)", out, want, h.stderr.String())
		}
	}
	if strings.Contains(out, claim.LeaseToken.String()) {
		t.Errorf("claims show printed the lease token:\n%s", out)
	}

	h = b.run("claims", "show", "--key", "k", "--json")
	var got claimJSON
	if err := json.Unmarshal([]byte(h.stdout.String()), &got); err != nil {
		t.Fatalf("claims show --json printed %q: %v", h.stdout.String(), err)
	}
	if got.ID != claim.ID || got.Status != "processing" || !got.LeaseLive || !got.Retained ||
		got.ResourceID != nil || got.ResponseBytes != 0 || !got.LeaseExpiresAt.Equal(claim.LeaseExpiresAt) {
		t.Errorf("claims show --json = %+v, want the live processing claim %s", got, claim.ID)
	}
	if strings.Contains(h.stdout.String(), claim.LeaseToken.String()) || strings.Contains(h.stdout.String(), "lease_token") {
		t.Errorf("claims show --json printed the lease token: %s", h.stdout.String())
	}
}

func TestClaimsShowPrintsACompletedClaimAndAPassedLease(t *testing.T) {
	t.Parallel()
	b := claimsSetup(t)
	done := b.hold(t, "done", 30*time.Second)
	if ok, err := b.plane.Complete(context.Background(), done, idempotency.Completion{
		ResourceType: "saved_search_snapshot", ResourceID: "snap-1", Response: json.RawMessage(`{"answer": "zebra-quartz"}`),
	}); !ok || err != nil {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	b.hold(t, "stale", time.Millisecond)
	time.Sleep(50 * time.Millisecond)

	out := b.run("claims", "show", "--key", "done").stdout.String()
	stored := len(b.row(t, "done").Response)
	for _, want := range []string{"status        completed", "ended: the claim is completed",
		"resource      saved_search_snapshot snap-1", "response      " + strconv.Itoa(stored) + " bytes"} {
		if !strings.Contains(out, want) {
			t.Errorf("claims show of a completed claim printed\n%s\nwithout %q", out, want)
		}
	}
	if strings.Contains(out, "zebra-quartz") {
		t.Errorf("claims show printed the stored response:\n%s", out)
	}
	if out := b.run("claims", "show", "--key", "stale").stdout.String(); !strings.Contains(out, "ago: the next claim of the key reclaims it") {
		t.Errorf("claims show of a passed lease printed\n%s", out)
	}
}

func TestClaimsShowOfNoClaimFails(t *testing.T) {
	t.Parallel()
	b := claimsSetup(t)
	h := newHarness(b.env)
	if code := h.run("claims", "show", "--org", b.org.String(), "--scope", startScope, "--key", "nothing"); code != 1 ||
		!strings.Contains(h.stderr.String(), `no claim is stored for organization `+b.org.String()+`, scope `+startScope+`, key "nothing"`) {
		t.Errorf("claims show of nothing = %d %q, want 1 and no claim", code, h.stderr.String())
	}
}

func TestClaimsReleaseDeletesAProcessingClaimAndLogsTheReason(t *testing.T) {
	t.Parallel()
	b := claimsSetup(t)
	claim := b.hold(t, "stuck", 30*time.Second)

	h := newHarness(b.env)
	code := h.run("claims", "release", "--org", b.org.String(), "--scope", startScope, "--key", "stuck",
		"--reason", "worker host lost; INC-42")
	if code != 0 {
		t.Fatalf("claims release = %d, stderr %q", code, h.stderr.String())
	}
	if rec := b.row(t, "stuck"); rec != nil {
		t.Fatalf("the claim is still stored after its release: %+v", rec)
	}
	if !strings.Contains(h.stdout.String(), "released claim "+claim.ID.String()) {
		t.Errorf("stdout %q does not report the release", h.stdout.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(h.stderr.String())), &line); err != nil {
		t.Fatalf("the log %q is not one JSON line: %v", h.stderr.String(), err)
	}
	want := map[string]any{"organization_id": b.org.String(), "scope": startScope, "key": "stuck",
		"claim_id": claim.ID.String(), "reason": "worker host lost; INC-42", "lease_live": true, "level": "WARN"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("log %s = %v, want %v (line %s)", k, line[k], v, h.stderr.String())
		}
	}
	if strings.Contains(h.stderr.String(), claim.LeaseToken.String()) {
		t.Errorf("the log holds the lease token: %s", h.stderr.String())
	}

	// The key is free: the next claim runs afresh.
	if out, err := b.plane.Claim(context.Background(), b.org, startScope, "stuck", "hash-stuck", time.Minute); err != nil ||
		out.Kind != idempotency.KindClaimed || out.Claim.Reclaimed {
		t.Errorf("Claim after the release = %+v, %v; want a new claim", out, err)
	}
}

func TestClaimsReleaseRefusesACompletedClaim(t *testing.T) {
	t.Parallel()
	b := claimsSetup(t)
	claim := b.hold(t, "journal", 30*time.Second)
	if ok, err := b.plane.Complete(context.Background(), claim, idempotency.Completion{Response: json.RawMessage(`{"ok": true}`)}); !ok || err != nil {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	h := newHarness(b.env)
	code := h.run("claims", "release", "--org", b.org.String(), "--scope", startScope, "--key", "journal", "--reason", "try")
	if code != 1 || !strings.Contains(h.stderr.String(), "is completed: a completed claim is never released") {
		t.Errorf("claims release of a completed claim = %d %q, want 1 and a refusal", code, h.stderr.String())
	}
	if rec := b.row(t, "journal"); rec == nil || rec.Status != idempotency.StatusCompleted {
		t.Errorf("after the refused release the claim is %+v, want it completed still", rec)
	}
}

func TestClaimsReleaseIsFencedByTheTokenItRead(t *testing.T) {
	t.Parallel()
	b := claimsSetup(t)
	logger := slog.New(slog.DiscardHandler)
	store := operator.NewStore(b.pool, nil)
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, c *idempotency.Claim)
		want   idempotency.Status // "" when the row is gone
	}{
		{"completed in between", func(t *testing.T, c *idempotency.Claim) {
			if ok, err := b.plane.Complete(context.Background(), c, idempotency.Completion{Response: json.RawMessage(`{}`)}); !ok || err != nil {
				t.Fatalf("Complete = %v, %v", ok, err)
			}
		}, idempotency.StatusCompleted},
		{"reclaimed in between", func(t *testing.T, c *idempotency.Claim) {
			time.Sleep(50 * time.Millisecond) // the 1 ms lease passes
			out, err := b.plane.Claim(context.Background(), b.org, startScope, c.Key, c.RequestHash, time.Minute)
			if err != nil || !out.Claim.Reclaimed {
				t.Fatalf("reclaim = %+v, %v", out, err)
			}
		}, idempotency.StatusProcessing},
	} {
		key := "fenced-" + strings.ReplaceAll(tt.name, " ", "-")
		claim := b.hold(t, key, time.Millisecond)
		read := b.row(t, key) // what the command read
		tt.change(t, claim)
		err := releaseClaim(context.Background(), store, read, "ops", "tester", logger)
		if !errors.Is(err, operator.ErrClaimChanged) {
			t.Errorf("%s: releaseClaim = %v, want operator.ErrClaimChanged", tt.name, err)
		}
		if rec := b.row(t, key); rec == nil || rec.Status != tt.want {
			t.Errorf("%s: after the fenced release the claim is %+v, want it %s and kept", tt.name, rec, tt.want)
		}
	}
}

func TestClaimsCommandLineErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://searchd@localhost:5432/searchd"}
	org := uuid.NewString()
	tests := []struct {
		env  map[string]string
		args []string
		want []string
	}{
		{env, []string{"claims"}, []string{"name a subcommand: show, release or resolve"}},
		{env, []string{"claims", "drop"}, []string{`unknown subcommand "drop"`}},
		{env, []string{"claims", "show"}, []string{"--org: is required", "--scope: is required", "--key: is required"}},
		{env, []string{"claims", "show", "--org", "acme", "--scope", "tool", "--key", "k"},
			[]string{`--org: "acme" is not a UUID`, `--scope: "tool" is not a scope of the plane`}},
		{env, []string{"claims", "show", "--org", uuid.Nil.String(), "--scope", startScope, "--key", "k"},
			[]string{"--org: is the nil UUID, which names no organization"}},
		{env, []string{"runs", "dispatch", "list", "--org", uuid.Nil.String(), "--limit", "0"},
			[]string{"--org: is the nil UUID, which names no organization", "--limit: 0 is out of range: from 1 to 1000"}},
		{env, []string{"claims", "show", "--org", org, "--scope", startScope, "--key", "a\tb"},
			[]string{"--key: holds a control character"}},
		{nil, []string{"claims", "show", "--org", org, "--scope", startScope, "--key", "k"},
			[]string{"DATABASE_URL: is required"}},
		{env, []string{"claims", "release", "--org", org, "--scope", startScope, "--key", "k"},
			[]string{"--reason: is required"}},
		{env, []string{"claims", "release", "--org", org, "--scope", startScope, "--key", "k", "--reason", "a\nb"},
			[]string{"--reason: must be one line"}},
		{env, []string{"claims", "release", "--org", org, "--scope", startScope, "--key", "k", "--reason", strings.Repeat("x", 501)},
			[]string{"--reason: must be valid UTF-8 of at most 500 characters"}},
		{env, []string{"claims", "release", "--org", org, "--scope", startScope, "--key", "k", "--reason", "r", "--log-format", "xml"},
			[]string{`--log-format: "xml" is not a log format`}},
		{env, []string{"claims", "resolve", "--org", org, "--scope", "tool.email.send", "--key", "k"},
			[]string{"--as: is required: delivered or retry", "--actor: is required", "--reason: is required"}},
		{env, []string{"claims", "resolve", "--org", org, "--scope", startScope, "--key", "k", "--as", "undo", "--actor", "ada", "--reason", "r"},
			[]string{`--scope: "` + startScope + `" is not a tool scope`, `--as: "undo" is neither delivered nor retry`}},
		{env, []string{"claims", "resolve", "--org", org, "--scope", "tool.email.send", "--key", "k", "--as", "retry", "--actor", "a\nb", "--reason", strings.Repeat("x", 501)},
			[]string{"--actor: must be one line", "--reason: must be valid UTF-8 of at most 500 characters"}},
	}
	for _, tt := range tests {
		h := newHarness(tt.env)
		code := h.run(tt.args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", tt.args, code, h.stderr.String())
		}
		for _, w := range tt.want {
			if !strings.Contains(h.stderr.String(), w) {
				t.Errorf("%q: stderr %q does not say %q", tt.args, h.stderr.String(), w)
			}
		}
	}
}

// uncertain leaves a tool call in the journal as uncertain, as the agent
// runtime's Runner (module toolrun) records a send to a vendor without
// idempotency support that was never acknowledged: a completed claim in the
// tool's scope whose stored answer is uncertain. It returns its key.
func (b *claimsBundle) uncertain(t *testing.T, occurrence int) string {
	t.Helper()
	ctx := context.Background()
	key := "tk1_claims_" + strconv.Itoa(occurrence) + "_" + uuid.NewString()
	out, err := b.plane.Claim(ctx, b.org, "tool.email.send", key, "h", 16*time.Second)
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim = %v, %v; want claimed", out.Kind, err)
	}
	body, err := tools.EncodeAnswer(tools.Result{Outcome: tools.OutcomeUncertain,
		Message: "tool call uncertain (no_answer): timeout after sending"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.plane.Complete(ctx, out.Claim, idempotency.Completion{Response: body}); err != nil || !ok {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	return key
}

func TestClaimsResolveRecordsThePersonsDecision(t *testing.T) {
	t.Parallel()
	b := claimsSetup(t)
	const scope = "tool.email.send"
	resolutions := func(key string) (rows []string) {
		t.Helper()
		r, err := b.pool.Query(context.Background(), `SELECT resolution || ' ' || actor || ' ' || reason FROM agent.tool_call_resolutions
WHERE organization_id = $1 AND scope = $2 AND key = $3 ORDER BY resolved_at`, b.org, scope, key)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var s string
			if err := r.Scan(&s); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, s)
		}
		return rows
	}
	resolve := func(key, as string) *harness {
		h := newHarness(b.env)
		h.run("claims", "resolve", "--org", b.org.String(), "--scope", scope, "--key", key,
			"--as", as, "--actor", "ada@ops", "--reason", "vendor console shows it sent; INC-7")
		return h
	}

	sent := b.uncertain(t, 1)
	claim, err := b.plane.Repository().Get(context.Background(), b.org, scope, sent)
	if err != nil || claim == nil {
		t.Fatal(claim, err)
	}
	h := resolve(sent, "delivered")
	if !strings.Contains(h.stdout.String(), "resolved claim "+claim.ID.String()) || !strings.Contains(h.stdout.String(), "as delivered by ada@ops") {
		t.Fatalf("claims resolve --as delivered printed %q (stderr %q)", h.stdout.String(), h.stderr.String())
	}
	out, err := b.plane.Read(context.Background(), b.org, scope, sent, claim.RequestHash)
	if err != nil || out.Kind != idempotency.KindCompleted || !strings.Contains(string(out.Response), `"resolved_by": "ada@ops"`) ||
		!strings.Contains(string(out.Response), `"outcome": "ok"`) {
		t.Fatalf("the call after --as delivered = %+v (%s), %v; want an ok answer resolved by ada@ops", out, out.Response, err)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(h.stderr.String())), &line); err != nil {
		t.Fatalf("the log %q is not one JSON line: %v", h.stderr.String(), err)
	}
	for k, v := range map[string]any{"level": "WARN", "actor": "ada@ops", "resolution": "delivered", "key": sent,
		"claim_id": claim.ID.String(), "reason": "vendor console shows it sent; INC-7"} {
		if line[k] != v {
			t.Errorf("log %s = %v, want %v (line %s)", k, line[k], v, h.stderr.String())
		}
	}
	if got := resolutions(sent); len(got) != 1 || got[0] != "delivered ada@ops vendor console shows it sent; INC-7" {
		t.Fatalf("recorded = %q, want the delivered resolution by ada@ops", got)
	}
	// Resolved: a second resolution is refused, and records nothing.
	h = newHarness(b.env)
	if code := h.run("claims", "resolve", "--org", b.org.String(), "--scope", scope, "--key", sent,
		"--as", "retry", "--actor", "bob@ops", "--reason", "again"); code != 1 || !strings.Contains(h.stderr.String(), "not uncertain") {
		t.Fatalf("a second resolve = %d %q, want 1 saying the call is not uncertain", code, h.stderr.String())
	}
	if got := resolutions(sent); len(got) != 1 {
		t.Fatalf("recorded = %q after a refused resolve, want one", got)
	}

	retried := b.uncertain(t, 2)
	h = resolve(retried, "retry")
	if !strings.Contains(h.stdout.String(), "authorized one retry") {
		t.Fatalf("claims resolve --as retry printed %q (stderr %q)", h.stdout.String(), h.stderr.String())
	}
	if rec, err := b.plane.Repository().Get(context.Background(), b.org, scope, retried); err != nil || rec != nil {
		t.Fatalf("the call after --as retry = %+v, %v; want its uncertain answer gone from the journal", rec, err)
	}
	if got := resolutions(retried); len(got) != 1 || !strings.HasPrefix(got[0], "retry ada@ops ") {
		t.Fatalf("recorded = %q, want the retry by ada@ops", got)
	}

	h = newHarness(b.env)
	if code := h.run("claims", "resolve", "--org", b.org.String(), "--scope", scope, "--key", "tk1_nothing",
		"--as", "retry", "--actor", "ada", "--reason", "r"); code != 1 || !strings.Contains(h.stderr.String(), "no claim is stored") {
		t.Fatalf("resolve of no claim = %d %q, want 1 saying no claim is stored", code, h.stderr.String())
	}
}
