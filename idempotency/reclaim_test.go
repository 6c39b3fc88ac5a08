package idempotency_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/idempotency"
)

// TestRepositoryReclaimRefusesEveryRowThatIsNotReclaimable calls the reclaim
// statement directly, below the service that would never ask it to take
// such rows, so each of its guards is tested on its own: every case breaks
// exactly one of the conditions that make a row reclaimable (same request
// hash, processing, lease passed, retention holding) and keeps the others.
// The control case meets all four at the very instant the lease passes and
// must be taken, so a guard that refuses too much fails here too.
func TestRepositoryReclaimRefusesEveryRowThatIsNotReclaimable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// prepare leaves the key "k" claimed with hashA (and perhaps
		// completed), and moves the clock.
		prepare func(t *testing.T, b *bundle, c *idempotency.Claim)
		hash    string
		taken   bool
	}{
		{
			name:    "reclaimable at the instant the lease passes (control)",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) { b.clock.Advance(toolLease) },
			hash:    hashA,
			taken:   true,
		},
		{
			name:    "a different request hash, lease passed",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) { b.clock.Advance(toolLease + time.Second) },
			hash:    hashB,
		},
		{
			name:    "a live lease, one microsecond before it passes",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) { b.clock.Advance(toolLease - time.Microsecond) },
			hash:    hashA,
		},
		{
			name: "a completed row, lease passed",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) {
				b.mustComplete(t, c, "done")
				b.clock.Advance(toolLease + time.Second)
			},
			hash: hashA,
		},
		{
			name: "a processing row at the instant its retention passes",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) {
				b.clock.Advance(idempotency.ToolRetention)
			},
			hash: hashA,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := b.mustClaim(t, toolScope, "k", hashA, toolLease)
			tc.prepare(t, b, c)
			before := b.row(t, toolScope, "k")

			token := uuid.New()
			rec, err := b.svc.Repository().Reclaim(context.Background(), idempotency.ClaimParams{
				OrganizationID: b.org, Scope: toolScope, Key: "k", RequestHash: tc.hash,
				LeaseToken: token, Lease: toolLease, Retention: idempotency.ToolRetention,
			})
			if err != nil {
				t.Fatalf("Reclaim error: %v", err)
			}
			after := b.row(t, toolScope, "k")
			if tc.taken {
				if rec == nil || rec.LeaseToken != token || after.LeaseToken != token || rec.ID != c.ID {
					t.Fatalf("Reclaim = %+v, want the row taken with the new token", rec)
				}
				return
			}
			if rec != nil {
				t.Fatalf("Reclaim = %+v, want nil: the row is not reclaimable", rec)
			}
			if after.LeaseToken != before.LeaseToken || !after.LeaseExpiresAt.Equal(before.LeaseExpiresAt) ||
				!after.RetainUntil.Equal(before.RetainUntil) || !after.ClaimedAt.Equal(before.ClaimedAt) ||
				after.Status != before.Status || after.RequestHash != before.RequestHash {
				t.Fatalf("a refused Reclaim changed the row:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// TestRepositoryReclaimTouchesOnlyItsOwnKey checks the address guards: a
// reclaimable row is not taken by a reclaim naming another organization,
// scope or key.
func TestRepositoryReclaimTouchesOnlyItsOwnKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.clock.Advance(toolLease + time.Second)
	for _, p := range []idempotency.ClaimParams{
		{OrganizationID: uuid.New(), Scope: toolScope, Key: "k"},
		{OrganizationID: b.org, Scope: "tool.other.call", Key: "k"},
		{OrganizationID: b.org, Scope: toolScope, Key: "k2"},
	} {
		p.RequestHash, p.LeaseToken, p.Lease, p.Retention = hashA, uuid.New(), toolLease, idempotency.ToolRetention
		rec, err := b.svc.Repository().Reclaim(context.Background(), p)
		if err != nil || rec != nil {
			t.Fatalf("Reclaim(%s, %s, %s) = %+v, %v; want nil", p.OrganizationID, p.Scope, p.Key, rec, err)
		}
	}
	if rec := b.row(t, toolScope, "k"); rec.LeaseToken != c.LeaseToken {
		t.Fatal("a reclaim of another address moved the lease of k")
	}
}
