package toolrun_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/toolrun"
	"github.com/searchd/searchd/toolrun/email/emailtest"
	"github.com/searchd/searchd/tools"
)

// uncertainCall makes an email.send to a vendor without idempotency support
// that sends and never acknowledges, so the journal records it uncertain.
func (b *bundle) uncertainCall(t *testing.T) (toolrun.Call, toolrun.Result) {
	t.Helper()
	b.vendor.Script(emailtest.Step{SendThenHang: true})
	c := b.call(sendInput, 1)
	live := b.execute(t, c, toolrun.AllowAll)
	if !live.Uncertain() {
		t.Fatalf("Execute after a lost acknowledgement = %+v, want uncertain", live)
	}
	return c, live
}

func (b *bundle) resolver() *tools.Resolver {
	return tools.NewResolver(b.pool, tools.ResolverConfig{Clock: b.clock.Clock()})
}

func (b *bundle) resolve(c toolrun.Call, key string, r tools.Resolution, actor string) (*tools.Resolved, error) {
	return b.resolver().Resolve(b.ctx, tools.ResolveParams{
		OrganizationID: b.org, Scope: c.Spec.Scope(), Key: key, Resolution: r,
		Actor: actor, Reason: "checked the vendor's outbox",
	})
}

// resolutions reads the recorded resolutions of c, oldest first.
func (b *bundle) resolutions(t *testing.T, c toolrun.Call) []map[string]any {
	t.Helper()
	rows, err := b.pool.Query(b.ctx, `
SELECT resolution, actor, reason, claim_id::text, uncertain_answer->>'outcome', resolved_at, retain_until
FROM agent.tool_call_resolutions WHERE organization_id = $1 AND scope = $2 AND key = $3 ORDER BY resolved_at`,
		b.org, c.Spec.Scope(), b.key(t, c))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var res, actor, reason, claim, outcome string
		var at, until time.Time
		if err := rows.Scan(&res, &actor, &reason, &claim, &outcome, &at, &until); err != nil {
			t.Fatal(err)
		}
		out = append(out, map[string]any{"resolution": res, "actor": actor, "reason": reason, "claim": claim,
			"outcome": outcome, "at": at, "until": until})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAnUncertainCallMarkedDeliveredReplaysASuccessNamingTheActor(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: false, timeout: 300 * time.Millisecond})
	c, _ := b.uncertainCall(t)
	claim := b.row(t, c)

	b.clock.Advance(2 * time.Hour)
	res, err := b.resolve(c, b.key(t, c), tools.ResolutionDelivered, "ada@ops")
	if err != nil {
		t.Fatalf("Resolve(delivered) = %v", err)
	}
	if res.ClaimID != claim.ID || res.Actor != "ada@ops" || !res.Uncertain.Uncertain() || !res.ResolvedAt.Equal(b.clock.Now()) {
		t.Fatalf("Resolve(delivered) = %+v, want claim %s resolved now by ada@ops from uncertain", res, claim.ID)
	}
	replay := b.execute(t, c, toolrun.AllowAll)
	if !replay.OK || replay.Outcome != toolrun.OutcomeOK || replay.ResolvedBy != "ada@ops" || !replay.Replayed {
		t.Fatalf("Execute after delivered = %+v, want a replayed ok resolved by ada@ops", replay)
	}
	b.wantCounts(t, 1, 1) // the one uncertain send, and nothing since
	got := b.resolutions(t, c)
	if len(got) != 1 || got[0]["resolution"] != "delivered" || got[0]["actor"] != "ada@ops" ||
		got[0]["reason"] != "checked the vendor's outbox" || got[0]["claim"] != claim.ID.String() || got[0]["outcome"] != toolrun.OutcomeUncertain ||
		!got[0]["until"].(time.Time).Equal(b.clock.Now().Add(tools.ResolutionRetention)) {
		t.Fatalf("recorded resolutions = %v, want one delivered by ada@ops with the uncertain answer, kept 396 days", got)
	}
	// It is resolved now: a second resolution of either kind is refused
	// and writes nothing.
	for _, r := range []tools.Resolution{tools.ResolutionDelivered, tools.ResolutionRetry} {
		if _, err := b.resolve(c, b.key(t, c), r, "bob@ops"); !errors.Is(err, tools.ErrNotUncertain) {
			t.Fatalf("Resolve(%s) of a resolved call = %v, want ErrNotUncertain", r, err)
		}
	}
	if n := len(b.resolutions(t, c)); n != 1 {
		t.Fatalf("%d resolutions recorded, want 1", n)
	}
}

func TestAnAuthorizedRetryMakesTheCallOnceMoreWithTheSameKey(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: false, timeout: 300 * time.Millisecond})
	c, _ := b.uncertainCall(t)
	key := b.key(t, c)

	// Before the resolution nothing calls the vendor again.
	b.clock.Advance(c.Spec.Lease() + time.Hour)
	if again := b.execute(t, c, toolrun.AllowAll); !again.Uncertain() || !again.Replayed {
		t.Fatalf("Execute of an uncertain call = %+v, want the uncertain answer replayed", again)
	}
	b.wantCounts(t, 1, 1)

	if _, err := b.resolve(c, key, tools.ResolutionRetry, "ada@ops"); err != nil {
		t.Fatalf("Resolve(retry) = %v", err)
	}
	// The retry runs through the policy and claims the same key.
	p := &policy{decision: toolrun.DecisionAllow}
	live := b.execute(t, c, p.check)
	wantSent(t, live, "msg_2")
	if p.count() != 1 {
		t.Fatalf("the retry asked the policy %d times, want once", p.count())
	}
	if rec := b.row(t, c); rec == nil || rec.Key != key || rec.Status != idempotency.StatusCompleted || rec.ResourceID != "msg_2" {
		t.Fatalf("claim after the retry = %+v, want key %s completed with msg_2", rec, key)
	}
	// One retry: every repeat now replays it.
	wantReplay(t, b.execute(t, c, toolrun.AllowAll), live)
	b.wantCounts(t, 2, 2)
	if _, err := b.resolve(c, key, tools.ResolutionRetry, "ada@ops"); !errors.Is(err, tools.ErrNotUncertain) {
		t.Fatalf("Resolve(retry) of an answered call = %v, want ErrNotUncertain", err)
	}
	if got := b.resolutions(t, c); len(got) != 1 || got[0]["resolution"] != "retry" || got[0]["actor"] != "ada@ops" {
		t.Fatalf("recorded resolutions = %v, want one retry by ada@ops", got)
	}
}

func TestARetryThatIsUncertainAgainWaitsForAPersonAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: false, timeout: 300 * time.Millisecond})
	c, _ := b.uncertainCall(t)
	if _, err := b.resolve(c, b.key(t, c), tools.ResolutionRetry, "ada@ops"); err != nil {
		t.Fatal(err)
	}
	b.vendor.Script(emailtest.Step{SendThenHang: true})
	if again := b.execute(t, c, toolrun.AllowAll); !again.Uncertain() || again.Replayed {
		t.Fatalf("the retried call = %+v, want uncertain again", again)
	}
	b.clock.Advance(c.Spec.Lease() + time.Hour)
	if again := b.execute(t, c, toolrun.AllowAll); !again.Uncertain() || !again.Replayed {
		t.Fatalf("after the retry = %+v, want its uncertain answer replayed", again)
	}
	b.wantCounts(t, 2, 2) // exactly one more attempt
	if _, err := b.resolve(c, b.key(t, c), tools.ResolutionDelivered, "bob@ops"); err != nil {
		t.Fatalf("Resolve(delivered) of the second uncertain answer = %v", err)
	}
	if n := len(b.resolutions(t, c)); n != 2 {
		t.Fatalf("%d resolutions recorded, want 2", n)
	}
}

func TestConcurrentResolutionsOfOneCallRecordOne(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: false, timeout: 300 * time.Millisecond})
	c, _ := b.uncertainCall(t)
	key := b.key(t, c)
	const n = 10
	errs := make([]error, n)
	b.race(t, n, func(i int) {
		r := tools.ResolutionRetry
		if i%2 == 0 {
			r = tools.ResolutionDelivered
		}
		_, errs[i] = b.resolve(c, key, r, "ops-"+string(rune('a'+i)))
	})
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, tools.ErrNotUncertain) && !errors.Is(err, tools.ErrNoCall):
			t.Errorf("resolution %d: %v, want success, ErrNotUncertain or ErrNoCall", i, err)
		}
	}
	if got := b.resolutions(t, c); won != 1 || len(got) != 1 {
		t.Fatalf("%d concurrent resolutions: %d succeeded, %d recorded; want 1 and 1", n, won, len(got))
	}
}

func TestResolveRefusesWhatIsNotAnUncertainCall(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: false})
	ok := b.call(sendInput, 1)
	b.execute(t, ok, toolrun.AllowAll) // sent and acknowledged
	inFlight := b.call(sendInput, 2)
	hash, _ := toolrun.RequestHash(inFlight.Spec.Name, inFlight.Input)
	if out, err := b.plane.Claim(b.ctx, b.org, inFlight.Spec.Scope(), b.key(t, inFlight), hash, inFlight.Spec.Lease()); err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim = %v, %v", out.Kind, err)
	}
	failed := b.call(`{"to":"ada@example.com","body":"no subject"}`, 1)
	b.execute(t, failed, toolrun.AllowAll) // a business failure

	for _, tc := range []struct {
		name string
		p    tools.ResolveParams
		want error
	}{
		{"a sent call", tools.ResolveParams{Key: b.key(t, ok)}, tools.ErrNotUncertain},
		{"a call in flight", tools.ResolveParams{Key: b.key(t, inFlight)}, tools.ErrNotUncertain},
		{"a business failure", tools.ResolveParams{Key: b.key(t, failed)}, tools.ErrNotUncertain},
		{"no such call", tools.ResolveParams{Key: "tk1_absent"}, tools.ErrNoCall},
		{"another organization", tools.ResolveParams{Key: b.key(t, ok), OrganizationID: uuid.New()}, tools.ErrNoCall},
		{"not a tool scope", tools.ResolveParams{Key: b.key(t, ok), Scope: idempotency.ScopeSavedSearchStart}, toolrun.ErrInvalid},
		{"an unknown resolution", tools.ResolveParams{Key: b.key(t, ok), Resolution: "undo"}, toolrun.ErrInvalid},
		{"no actor", tools.ResolveParams{Key: b.key(t, ok), Actor: " "}, toolrun.ErrInvalid},
		{"an actor of two lines", tools.ResolveParams{Key: b.key(t, ok), Actor: "ada\nbob"}, toolrun.ErrInvalid},
		{"a reason too long", tools.ResolveParams{Key: b.key(t, ok), Reason: strings.Repeat("r", tools.MaxReasonLen+1)}, toolrun.ErrInvalid},
		{"an empty key", tools.ResolveParams{Key: ""}, toolrun.ErrInvalid},
	} {
		p := tc.p
		if p.OrganizationID == uuid.Nil {
			p.OrganizationID = b.org
		}
		if p.Scope == "" {
			p.Scope = ok.Spec.Scope()
		}
		if p.Resolution == "" {
			p.Resolution = tools.ResolutionRetry
		}
		if p.Actor == "" {
			p.Actor = "ada@ops"
		}
		if p.Reason == "" {
			p.Reason = "because"
		}
		if _, err := b.resolver().Resolve(b.ctx, p); !errors.Is(err, tc.want) {
			t.Errorf("%s: Resolve = %v, want %v", tc.name, err, tc.want)
		}
	}
	var n int
	if err := b.pool.QueryRow(b.ctx, `SELECT count(*) FROM agent.tool_call_resolutions`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d resolutions recorded (%v), want none", n, err)
	}
	if rec := b.row(t, inFlight); rec == nil || rec.Status != idempotency.StatusProcessing {
		t.Fatalf("the claim in flight = %+v, want it untouched", rec)
	}
	if rec := b.row(t, ok); rec == nil || rec.ResourceID != "msg_1" {
		t.Fatalf("the sent call = %+v, want it untouched", rec)
	}
}

func TestAnUncertainAnswerPastItsRetentionHasNothingToResolve(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: false, timeout: 300 * time.Millisecond})
	c, _ := b.uncertainCall(t)
	b.clock.Advance(idempotency.ToolRetention - time.Microsecond)
	if _, err := b.resolve(c, b.key(t, c), tools.ResolutionDelivered, "ada@ops"); err != nil {
		t.Fatalf("Resolve at the last retained instant = %v, want it resolved", err)
	}
	c2 := b.call(sendInput, 2)
	b.vendor.Script(emailtest.Step{SendThenHang: true})
	if live := b.execute(t, c2, toolrun.AllowAll); !live.Uncertain() {
		t.Fatalf("second call = %+v, want uncertain", live)
	}
	b.clock.Advance(idempotency.ToolRetention)
	if _, err := b.resolve(c2, b.key(t, c2), tools.ResolutionDelivered, "ada@ops"); !errors.Is(err, tools.ErrNoCall) {
		t.Fatalf("Resolve past the retention = %v, want ErrNoCall", err)
	}
}
