package idempotency_test

import (
	"bytes"
	"context"
	"fmt"
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
			b, c, before := claimPrepared(t, tc.prepare)

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
			wantRefused(t, "Reclaim", rec, before, after, "the row is not reclaimable")
		})
	}
}

// TestRepositoryReclaimTouchesOnlyItsOwnKey checks the address guards: a
// reclaimable row is not taken by a reclaim naming another organization,
// scope or key.
func TestRepositoryReclaimTouchesOnlyItsOwnKey(t *testing.T) {
	t.Parallel()
	wantOnlyItsOwnKey(t, toolLease+time.Second, "Reclaim", (*idempotency.Repository).Reclaim)
}

// TestRepositoryReplaceExpiredRefusesEveryRowStillRetained calls the
// takeover of an expired row directly, below the service, which only asks
// for it after reading the row as past its retention and so hides the
// statement's own guard. That guard is what stops two workers that both
// read the row as expired from both taking it. Every refused case keeps a
// row whose retention still holds, in each state a row can be in; the
// controls meet the guard at the very instant retention passes and must be
// taken, so a guard that refuses too much fails here too.
func TestRepositoryReplaceExpiredRefusesEveryRowStillRetained(t *testing.T) {
	t.Parallel()
	retention := idempotency.ToolRetention
	for _, tc := range []struct {
		name string
		// prepare leaves the key "k" claimed with hashA (and perhaps
		// completed), and moves the clock.
		prepare func(t *testing.T, b *bundle, c *idempotency.Claim)
		taken   bool
	}{
		{
			name:    "a processing row at the instant its retention passes (control)",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) { b.clock.Advance(retention) },
			taken:   true,
		},
		{
			name: "a completed row at the instant its retention passes (control)",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) {
				b.mustComplete(t, c, "done")
				b.clock.Advance(retention)
			},
			taken: true,
		},
		{
			name:    "a processing row, lease passed, one microsecond before its retention passes",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) { b.clock.Advance(retention - time.Microsecond) },
		},
		{
			name: "a completed row one microsecond before its retention passes",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) {
				b.mustComplete(t, c, "done")
				b.clock.Advance(retention - time.Microsecond)
			},
		},
		{
			name:    "a live processing claim",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) { b.clock.Advance(toolLease - time.Microsecond) },
		},
		{
			name:    "a processing claim whose lease has just passed",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) { b.clock.Advance(toolLease) },
		},
		{
			name:    "a completed row",
			prepare: func(t *testing.T, b *bundle, c *idempotency.Claim) { b.mustComplete(t, c, "done") },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, _, before := claimPrepared(t, tc.prepare)

			p := idempotency.ClaimParams{
				ID: uuid.New(), OrganizationID: b.org, Scope: toolScope, Key: "k", RequestHash: hashB,
				LeaseToken: uuid.New(), Lease: toolLease, Retention: retention,
			}
			rec, err := b.svc.Repository().ReplaceExpired(context.Background(), p)
			if err != nil {
				t.Fatalf("ReplaceExpired error: %v", err)
			}
			after := b.row(t, toolScope, "k")
			if tc.taken {
				now := b.clock.Now()
				if rec == nil || rec.ID != p.ID || rec.LeaseToken != p.LeaseToken || rec.RequestHash != hashB ||
					rec.Status != idempotency.StatusProcessing || rec.Response != nil || rec.ResourceID != "" ||
					!rec.ClaimedAt.Equal(now) || !rec.LeaseExpiresAt.Equal(now.Add(toolLease)) ||
					!rec.RetainUntil.Equal(now.Add(retention)) {
					t.Fatalf("ReplaceExpired = %+v, want a new processing claim %s with token %s and hash %s at %s",
						rec, p.ID, p.LeaseToken, hashB, now)
				}
				if after.ID != p.ID || after.LeaseToken != p.LeaseToken {
					t.Fatalf("stored row = %+v, want the new claim", after)
				}
				return
			}
			wantRefused(t, "ReplaceExpired", rec, before, after,
				fmt.Sprintf("the row's retention holds until %s, now is %s", before.RetainUntil, b.clock.Now()))
		})
	}
}

// TestRepositoryReplaceExpiredTouchesOnlyItsOwnKey checks the address
// guards: an expired row is not taken by a takeover naming another
// organization, scope or key.
func TestRepositoryReplaceExpiredTouchesOnlyItsOwnKey(t *testing.T) {
	t.Parallel()
	wantOnlyItsOwnKey(t, idempotency.ToolRetention+time.Second, "ReplaceExpired", (*idempotency.Repository).ReplaceExpired)
}

// TestRacingTakeoversOfOneExpiredRowLeaveExactlyOneOwner races takeovers of
// one expired row, each one statement committed on its own connection, as
// two workers that both read the row as expired would send them. The first
// to lock the row takes it; each other re-checks the row the winner wrote
// (READ COMMITTED re-evaluates the WHERE on the new version), finds its
// retention holding and takes nothing, so exactly one worker owns the key
// and the stored row is that worker's.
func TestRacingTakeoversOfOneExpiredRowLeaveExactlyOneOwner(t *testing.T) {
	t.Parallel()
	const n = 16
	b := setup(t)
	b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.clock.Advance(idempotency.ToolRetention + time.Second)
	params := make([]idempotency.ClaimParams, n)
	for i := range params {
		params[i] = idempotency.ClaimParams{
			ID: uuid.New(), OrganizationID: b.org, Scope: toolScope, Key: "k", RequestHash: hashA,
			LeaseToken: uuid.New(), Lease: toolLease, Retention: idempotency.ToolRetention,
		}
	}
	recs := make([]*idempotency.Record, n)
	concurrently(t, b.pool, n, func(i int) (idempotency.Outcome, error) {
		var err error
		recs[i], err = b.svc.Repository().ReplaceExpired(context.Background(), params[i])
		return idempotency.Outcome{}, err
	})
	var owners []int
	for i, rec := range recs {
		if rec != nil {
			owners = append(owners, i)
		}
	}
	if len(owners) != 1 {
		t.Fatalf("%d of %d racing takeovers of one expired row took it (callers %v), want exactly 1", len(owners), n, owners)
	}
	w := params[owners[0]]
	if rec := b.row(t, toolScope, "k"); rec.ID != w.ID || rec.LeaseToken != w.LeaseToken {
		t.Fatalf("stored row = %+v, want the winner's claim %s", rec, w.ID)
	}
}

// TestRacingClaimsOfOneExpiredKeyGiveOneClaim is the same race through the
// service: callers that all find the key past its retention get exactly one
// claim between them; every other caller meets that claim's live lease.
func TestRacingClaimsOfOneExpiredKeyGiveOneClaim(t *testing.T) {
	t.Parallel()
	const n = 16
	b := setup(t)
	b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.clock.Advance(idempotency.ToolRetention + time.Second)
	outs := concurrently(t, b.pool, n, func(int) (idempotency.Outcome, error) {
		return b.svc.Claim(context.Background(), b.org, toolScope, "k", hashB, toolLease)
	})
	kinds := countKinds(outs)
	if kinds[idempotency.KindClaimed] != 1 || kinds[idempotency.KindProcessing] != n-1 {
		t.Fatalf("outcomes of %d racing claims of an expired key = %v, want 1 claimed and %d processing", n, kinds, n-1)
	}
	for _, o := range outs {
		if o.Kind == idempotency.KindClaimed {
			if rec := b.row(t, toolScope, "k"); rec.ID != o.Claim.ID || rec.LeaseToken != o.Claim.LeaseToken {
				t.Fatalf("stored row = %+v, want the one claim %s", rec, o.Claim.ID)
			}
		}
	}
}

// wantOnlyItsOwnKey claims the key "k" with hashA, moves the clock by
// advance, and calls take (named name) for another organization, scope and
// key, each with hashA: every call must take nothing and leave k's row as
// it was.
func wantOnlyItsOwnKey(t *testing.T, advance time.Duration, name string,
	take func(*idempotency.Repository, context.Context, idempotency.ClaimParams) (*idempotency.Record, error)) {
	t.Helper()
	b := setup(t)
	b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.clock.Advance(advance)
	before := b.row(t, toolScope, "k")
	for _, p := range []idempotency.ClaimParams{
		{OrganizationID: uuid.New(), Scope: toolScope, Key: "k"},
		{OrganizationID: b.org, Scope: "tool.other.call", Key: "k"},
		{OrganizationID: b.org, Scope: toolScope, Key: "k2"},
	} {
		p.ID, p.RequestHash, p.LeaseToken, p.Lease, p.Retention = uuid.New(), hashA, uuid.New(), toolLease, idempotency.ToolRetention
		rec, err := take(b.svc.Repository(), context.Background(), p)
		if err != nil {
			t.Fatalf("%s(%s, %s, %s): %v", name, p.OrganizationID, p.Scope, p.Key, err)
		}
		wantRefused(t, name, rec, before, b.row(t, toolScope, "k"),
			fmt.Sprintf("%s, %s, %s is another address", p.OrganizationID, p.Scope, p.Key))
	}
}

// wantRefused fails t unless call took nothing (for the reason why) and left the row as it was.
func wantRefused(t *testing.T, call string, rec, before, after *idempotency.Record, why string) {
	t.Helper()
	if rec != nil {
		t.Fatalf("%s = %+v, want nil: %s", call, rec, why)
	}
	if !sameRow(after, before) {
		t.Fatalf("a refused %s changed the row:\nbefore %+v\nafter  %+v", call, before, after)
	}
}

// claimPrepared claims the key "k" with hashA in a new bundle, then runs
// prepare, and returns the bundle, the claim and the row prepare left.
func claimPrepared(t *testing.T, prepare func(t *testing.T, b *bundle, c *idempotency.Claim)) (*bundle, *idempotency.Claim, *idempotency.Record) {
	t.Helper()
	b := setup(t)
	c := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	prepare(t, b, c)
	return b, c, b.row(t, toolScope, "k")
}

// sameRow reports whether a and b hold the same stored row, whenever each
// was read.
func sameRow(a, b *idempotency.Record) bool {
	return a.ID == b.ID && a.OrganizationID == b.OrganizationID && a.Scope == b.Scope && a.Key == b.Key &&
		a.RequestHash == b.RequestHash && a.Status == b.Status && a.LeaseToken == b.LeaseToken &&
		a.ResourceType == b.ResourceType && a.ResourceID == b.ResourceID && bytes.Equal(a.Response, b.Response) &&
		a.ClaimedAt.Equal(b.ClaimedAt) && a.LeaseExpiresAt.Equal(b.LeaseExpiresAt) && a.RetainUntil.Equal(b.RetainUntil)
}
