package idempotency_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/searchd/searchd/idempotency"
)

// model is what one key should hold after any sequence of calls.
type model struct {
	stored       bool
	status       idempotency.Status
	hash         string
	token        uuid.UUID // the live fence, when processing
	leaseExpires time.Time
	retainUntil  time.Time
	answer       string // when completed
}

// TestPropertyRandomInterleavings drives random interleavings of claim,
// complete, release, read and time passing by several workers on one key,
// against the real table, and checks each answer against a simple model:
// never two owners of a live lease, a completion is never lost, and a stale
// worker never overwrites.
func TestPropertyRandomInterleavings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const workers = 3
	hashes := []string{hashA, hashB}
	leases := []time.Duration{time.Second, toolLease}
	steps := []time.Duration{time.Millisecond, time.Second, toolLease / 2, toolLease, 2 * toolLease, 10 * 24 * time.Hour, idempotency.ToolRetention}

	rapid.Check(t, func(rt *rapid.T) {
		key := uuid.NewString() // every run on a key of its own
		clk := b.clock
		var m model
		held := make([]*idempotency.Claim, workers) // each worker's latest claim, possibly stale
		answers := 0

		// expect is the kind the model predicts for a caller with hash h.
		expect := func(h string, reading bool) idempotency.Kind {
			now := clk.Now()
			switch {
			case !m.stored || !m.retainUntil.After(now):
				if reading {
					return idempotency.KindAbsent
				}
				return idempotency.KindClaimed
			case m.hash != h:
				return idempotency.KindConflict
			case m.status == idempotency.StatusCompleted:
				return idempotency.KindCompleted
			case m.leaseExpires.After(now):
				return idempotency.KindProcessing
			case reading:
				return idempotency.KindAbsent
			}
			return idempotency.KindClaimed
		}

		rt.Repeat(map[string]func(*rapid.T){
			"claim": func(rt *rapid.T) {
				w := rapid.IntRange(0, workers-1).Draw(rt, "worker")
				h := rapid.SampledFrom(hashes).Draw(rt, "hash")
				lease := rapid.SampledFrom(leases).Draw(rt, "lease")
				want := expect(h, false)
				out, err := b.svc.Claim(ctx, b.org, toolScope, key, h, lease)
				if err != nil {
					rt.Fatal(err)
				}
				if out.Kind != want {
					rt.Fatalf("worker %d Claim(%s) = %v, model says %v", w, h, out.Kind, want)
				}
				switch out.Kind {
				case idempotency.KindClaimed:
					now := clk.Now()
					if m.stored && m.status == idempotency.StatusProcessing && m.leaseExpires.After(now) {
						rt.Fatalf("two owners: worker %d claimed a key whose lease is live", w)
					}
					if out.Claim.LeaseToken == m.token {
						rt.Fatal("a claim reused the previous lease token")
					}
					retain := now.Add(max(lease, idempotency.ToolRetention))
					if m.stored && m.retainUntil.After(now) && m.retainUntil.After(retain) {
						retain = m.retainUntil // a reclaim never shortens retention
					}
					m = model{stored: true, status: idempotency.StatusProcessing, hash: h,
						token: out.Claim.LeaseToken, leaseExpires: now.Add(lease), retainUntil: retain}
					held[w] = out.Claim
				case idempotency.KindCompleted:
					if string(out.Response) != fmt.Sprintf(`{"answer": %q}`, m.answer) || out.ResourceID != m.answer {
						rt.Fatalf("completed replay = %s / %s, want answer %q", out.Response, out.ResourceID, m.answer)
					}
				}
			},
			"complete": func(rt *rapid.T) {
				w := rapid.IntRange(0, workers-1).Draw(rt, "worker")
				if held[w] == nil {
					rt.Skip("worker holds no claim")
				}
				answers++
				v := fmt.Sprintf("w%d-%d", w, answers)
				ok, err := b.svc.Complete(ctx, held[w], answer(v))
				if err != nil {
					rt.Fatal(err)
				}
				// Only the holder of the current fence completes; a lease
				// that passed without a reclaim still holds the fence.
				want := m.stored && m.status == idempotency.StatusProcessing && m.token == held[w].LeaseToken
				if ok != want {
					rt.Fatalf("worker %d Complete = %v, model says %v", w, ok, want)
				}
				if ok {
					m.status, m.answer = idempotency.StatusCompleted, v
				}
			},
			"release": func(rt *rapid.T) {
				w := rapid.IntRange(0, workers-1).Draw(rt, "worker")
				if held[w] == nil {
					rt.Skip("worker holds no claim")
				}
				ok, err := b.svc.Release(ctx, held[w])
				if err != nil {
					rt.Fatal(err)
				}
				want := m.stored && m.status == idempotency.StatusProcessing && m.token == held[w].LeaseToken
				if ok != want {
					rt.Fatalf("worker %d Release = %v, model says %v", w, ok, want)
				}
				if ok {
					m = model{}
				}
			},
			"read": func(rt *rapid.T) {
				h := rapid.SampledFrom(hashes).Draw(rt, "hash")
				want := expect(h, true)
				out, err := b.svc.Read(ctx, b.org, toolScope, key, h)
				if err != nil {
					rt.Fatal(err)
				}
				if out.Kind != want {
					rt.Fatalf("Read(%s) = %v, model says %v", h, out.Kind, want)
				}
			},
			"time passes": func(rt *rapid.T) {
				clk.Advance(rapid.SampledFrom(steps).Draw(rt, "step"))
			},
			"": func(rt *rapid.T) {
				// The row agrees with the model.
				rec, err := b.svc.Repository().Get(ctx, b.org, toolScope, key)
				if err != nil {
					rt.Fatal(err)
				}
				if !m.stored {
					if rec != nil && rec.Retained() {
						rt.Fatalf("model holds nothing, table holds %+v", rec)
					}
					return
				}
				if rec == nil {
					rt.Fatal("model holds a claim, table holds nothing: an answer was lost")
				}
				if rec.Status != m.status || rec.RequestHash != m.hash || !rec.RetainUntil.Equal(m.retainUntil) {
					rt.Fatalf("row %s/%s retain %v, model %s/%s retain %v", rec.Status, rec.RequestHash, rec.RetainUntil, m.status, m.hash, m.retainUntil)
				}
				if m.status == idempotency.StatusProcessing && rec.LeaseToken != m.token {
					rt.Fatal("the stored fence is not the last claimer's")
				}
			},
		})
	})
}
