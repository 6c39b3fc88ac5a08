package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
)

const (
	toolScope = "tool.email.send"
	hashA     = "hash-a"
	hashB     = "hash-b"
	toolLease = 60 * time.Second
)

func TestClaimConcurrentSameKeyHasOneOwner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The real database clock and real commits: 20 workers race one key.
	svc := idempotency.NewService(b.pool, idempotency.Config{})
	outs := concurrently(t, b.pool, 20, func(int) (idempotency.Outcome, error) {
		return svc.Claim(context.Background(), b.org, toolScope, "k", hashA, toolLease)
	})
	kinds := countKinds(outs)
	if kinds[idempotency.KindClaimed] != 1 || kinds[idempotency.KindProcessing] != 19 {
		t.Fatalf("20 concurrent claims = %v, want 1 claimed and 19 processing", kinds)
	}
	for _, o := range outs {
		if o.Kind == idempotency.KindProcessing && (o.RetryAfter <= 0 || o.RetryAfter > toolLease) {
			t.Errorf("processing RetryAfter = %v, want in (0, %v]", o.RetryAfter, toolLease)
		}
	}
	if n := b.rowCount(t); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
}

func TestClaimSameKeyDifferentHashConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mustClaim(t, toolScope, "k", hashA, toolLease)

	if out := b.claim(t, toolScope, "k", hashB, toolLease); out.Kind != idempotency.KindConflict {
		t.Fatalf("Claim with other hash on a live lease = %v, want conflict", out.Kind)
	}
	// The hash is compared first, whatever the lease says.
	b.clock.Advance(toolLease + time.Second)
	if out := b.claim(t, toolScope, "k", hashB, toolLease); out.Kind != idempotency.KindConflict {
		t.Fatalf("Claim with other hash on a passed lease = %v, want conflict", out.Kind)
	}
	if out := b.read(t, toolScope, "k", hashB); out.Kind != idempotency.KindConflict {
		t.Fatalf("Read with other hash on a passed lease = %v, want conflict", out.Kind)
	}
	// The conflicting callers took nothing: the original hash reclaims.
	c := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.mustComplete(t, c, "a")
	if out := b.claim(t, toolScope, "k", hashB, toolLease); out.Kind != idempotency.KindConflict {
		t.Fatalf("Claim with other hash on a completed key = %v, want conflict", out.Kind)
	}
	if out := b.read(t, toolScope, "k", hashB); out.Kind != idempotency.KindConflict {
		t.Fatalf("Read with other hash on a completed key = %v, want conflict", out.Kind)
	}
}

func TestCompletedDuplicateReturnsStoredAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.mustComplete(t, c, "first")

	wantCompleted(t, b.claim(t, toolScope, "k", hashA, toolLease), "first")
	wantCompleted(t, b.read(t, toolScope, "k", hashA), "first")
	// A resource alone is an answer too.
	c2 := b.mustClaim(t, toolScope, "k2", hashA, toolLease)
	ok, err := b.svc.Complete(context.Background(), c2, idempotency.Completion{ResourceType: "message", ResourceID: "m-1"})
	if err != nil || !ok {
		t.Fatalf("Complete(resource only) = %v, %v", ok, err)
	}
	out := b.claim(t, toolScope, "k2", hashA, toolLease)
	if out.Kind != idempotency.KindCompleted || out.ResourceType != "message" || out.ResourceID != "m-1" || out.Response != nil {
		t.Fatalf("replay of resource-only completion = %+v", out)
	}
}

func TestReadWritesNothingAndAnswersAbsentForPassedLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if out := b.read(t, toolScope, "k", hashA); out.Kind != idempotency.KindAbsent {
		t.Fatalf("Read of nothing = %v, want absent", out.Kind)
	}
	if n := b.rowCount(t); n != 0 {
		t.Fatalf("Read wrote %d rows", n)
	}

	c := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	if out := b.read(t, toolScope, "k", hashA); out.Kind != idempotency.KindProcessing || out.RetryAfter != toolLease {
		t.Fatalf("Read of live claim = %v (retry after %v), want processing in %v", out.Kind, out.RetryAfter, toolLease)
	}
	b.clock.Advance(toolLease)
	before := b.row(t, toolScope, "k")
	if out := b.read(t, toolScope, "k", hashA); out.Kind != idempotency.KindAbsent {
		t.Fatalf("Read of claim whose lease passed = %v, want absent", out.Kind)
	}
	after := b.row(t, toolScope, "k")
	if after.LeaseToken != c.LeaseToken || !after.LeaseExpiresAt.Equal(before.LeaseExpiresAt) || after.Status != idempotency.StatusProcessing {
		t.Fatalf("Read changed the row: %+v -> %+v", before, after)
	}
	// Absent tells the caller to claim, and the claim reclaims.
	out := b.claim(t, toolScope, "k", hashA, toolLease)
	if out.Kind != idempotency.KindClaimed || !out.Claim.Reclaimed || out.Claim.ID != c.ID {
		t.Fatalf("Claim after absent = %+v, want the same claim reclaimed", out)
	}
}

func TestCrashedWorkerIsReclaimedAndTheRunContinues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	crashed := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	// The worker dies without completing or releasing. A retry within the
	// lease must not execute.
	b.clock.Advance(toolLease - time.Second)
	if out := b.claim(t, toolScope, "k", hashA, toolLease); out.Kind != idempotency.KindProcessing || out.RetryAfter != time.Second {
		t.Fatalf("retry inside the lease = %v (retry after %v), want processing in 1s", out.Kind, out.RetryAfter)
	}
	b.clock.Advance(time.Second)
	next := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	if !next.Reclaimed || next.LeaseToken == crashed.LeaseToken {
		t.Fatalf("reclaim = %+v, want reclaimed with a new lease token", next)
	}
	b.mustComplete(t, next, "done")
	wantCompleted(t, b.claim(t, toolScope, "k", hashA, toolLease), "done")
}

func TestLiveLeaseIsNeverStolenAndRaisesInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	held := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.clock.Advance(20 * time.Second)
	out := b.claim(t, toolScope, "k", hashA, toolLease)
	if out.Kind != idempotency.KindProcessing || out.Claim != nil || out.Response != nil {
		t.Fatalf("Claim on a live lease = %+v, want processing and nothing else", out)
	}
	err := out.InFlight(toolScope, "k")
	var inflight *idempotency.InFlightError
	if !errors.Is(err, idempotency.ErrClaimInFlight) || !errors.As(err, &inflight) || inflight.RetryAfter != 40*time.Second {
		t.Fatalf("InFlight() = %v, want ErrClaimInFlight with RetryAfter 40s", err)
	}
	for _, k := range []idempotency.Kind{idempotency.KindClaimed, idempotency.KindCompleted, idempotency.KindConflict, idempotency.KindAbsent} {
		if err := (idempotency.Outcome{Kind: k}).InFlight(toolScope, "k"); err != nil {
			t.Errorf("InFlight() of %v = %v, want nil", k, err)
		}
	}
	if rec := b.row(t, toolScope, "k"); rec.LeaseToken != held.LeaseToken {
		t.Fatal("the live lease moved to another worker")
	}
	b.mustComplete(t, held, "holder")
}

func TestPassedLeaseIsReclaimedByExactlyOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	crashed := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.clock.Advance(toolLease + time.Second)
	outs := concurrently(t, b.pool, 20, func(int) (idempotency.Outcome, error) {
		return b.svc.Claim(context.Background(), b.org, toolScope, "k", hashA, toolLease)
	})
	kinds := countKinds(outs)
	if kinds[idempotency.KindClaimed] != 1 || kinds[idempotency.KindProcessing] != 19 {
		t.Fatalf("20 concurrent reclaims = %v, want 1 claimed and 19 processing", kinds)
	}
	for _, o := range outs {
		if o.Kind == idempotency.KindClaimed {
			if !o.Claim.Reclaimed || o.Claim.LeaseToken == crashed.LeaseToken {
				t.Fatalf("winner = %+v, want a reclaim with a new token", o.Claim)
			}
			if rec := b.row(t, toolScope, "k"); rec.LeaseToken != o.Claim.LeaseToken {
				t.Fatal("the stored token is not the winner's")
			}
		}
	}
}

// Every racer has seen the lease pass; the statement itself must let one
// through. This is the repository half of the guarantee, without the
// service's read in front of it.
func TestRepositoryReclaimRaceHasOneWinner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.clock.Advance(toolLease + time.Second)
	repo := b.svc.Repository()
	tokens := make([]uuid.UUID, 20)
	won := make([]bool, 20)
	concurrently(t, b.pool, 20, func(i int) (idempotency.Outcome, error) {
		tokens[i] = uuid.New()
		rec, err := repo.Reclaim(context.Background(), idempotency.ClaimParams{
			OrganizationID: b.org, Scope: toolScope, Key: "k", RequestHash: hashA,
			LeaseToken: tokens[i], Lease: toolLease, Retention: idempotency.ToolRetention,
		})
		won[i] = rec != nil
		return idempotency.Outcome{}, err
	})
	winners := 0
	for i, w := range won {
		if w {
			winners++
			if rec := b.row(t, toolScope, "k"); rec.LeaseToken != tokens[i] {
				t.Fatal("the stored token is not the winner's")
			}
		}
	}
	if winners != 1 {
		t.Fatalf("20 racing Reclaim calls: %d winners, want 1", winners)
	}
}

func TestStaleWorkerCannotCompleteOrRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	stale := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.clock.Advance(toolLease + time.Second)
	owner := b.mustClaim(t, toolScope, "k", hashA, toolLease)

	// The stalled worker wakes up: both of its endings are silent no-ops.
	ok, err := b.svc.Complete(ctx, stale, answer("stale"))
	if err != nil || ok {
		t.Fatalf("stale Complete = %v, %v; want false, nil", ok, err)
	}
	ok, err = b.svc.Release(ctx, stale)
	if err != nil || ok {
		t.Fatalf("stale Release = %v, %v; want false, nil", ok, err)
	}
	rec := b.row(t, toolScope, "k")
	if rec.Status != idempotency.StatusProcessing || rec.LeaseToken != owner.LeaseToken || rec.Response != nil {
		t.Fatalf("after stale endings row = %+v, want the owner's processing claim", rec)
	}
	b.mustComplete(t, owner, "owner")
	// Waking after the owner completed changes nothing either.
	if ok, err := b.svc.Complete(ctx, stale, answer("stale")); err != nil || ok {
		t.Fatalf("stale Complete after owner = %v, %v", ok, err)
	}
	if ok, err := b.svc.Release(ctx, stale); err != nil || ok {
		t.Fatalf("stale Release after owner = %v, %v", ok, err)
	}
	wantCompleted(t, b.read(t, toolScope, "k", hashA), "owner")
}

func TestEndingsAreTerminal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.mustComplete(t, c, "one")
	if ok, err := b.svc.Complete(ctx, c, answer("two")); err != nil || ok {
		t.Fatalf("second Complete = %v, %v; want false, nil", ok, err)
	}
	if ok, err := b.svc.Release(ctx, c); err != nil || ok {
		t.Fatalf("Release of a completed claim = %v, %v; want false, nil", ok, err)
	}
	wantCompleted(t, b.read(t, toolScope, "k", hashA), "one")

	// A released claim is gone, and the next attempt executes.
	r := b.mustClaim(t, toolScope, "r", hashA, toolLease)
	if ok, err := b.svc.Release(ctx, r); err != nil || !ok {
		t.Fatalf("Release = %v, %v; want true, nil", ok, err)
	}
	if ok, err := b.svc.Complete(ctx, r, answer("late")); err != nil || ok {
		t.Fatalf("Complete after Release = %v, %v; want false, nil", ok, err)
	}
	if out := b.read(t, toolScope, "r", hashA); out.Kind != idempotency.KindAbsent {
		t.Fatalf("Read after Release = %v, want absent", out.Kind)
	}
	next := b.mustClaim(t, toolScope, "r", hashA, toolLease)
	if next.Reclaimed || next.ID == r.ID {
		t.Fatalf("claim after release = %+v, want a new claim", next)
	}
}

func TestCompletedClaimReadableAfterLeaseWhileRetained(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.mustClaim(t, idempotency.ScopeSavedSearchStart, "k", hashA, idempotency.SavedSearchStartLease)
	b.mustComplete(t, c, "snap")
	b.clock.Advance(23 * time.Hour)
	wantCompleted(t, b.read(t, idempotency.ScopeSavedSearchStart, "k", hashA), "snap")
	wantCompleted(t, b.claim(t, idempotency.ScopeSavedSearchStart, "k", hashA, idempotency.SavedSearchStartLease), "snap")
	b.clock.Advance(time.Hour) // 24 h: the retention of the scope has passed
	if out := b.read(t, idempotency.ScopeSavedSearchStart, "k", hashA); out.Kind != idempotency.KindAbsent {
		t.Fatalf("Read after 24h = %v, want absent", out.Kind)
	}
}

func TestReclaimMovesLeaseAndNeverShortensRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.clock.Advance(toolLease)
	second := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	if !second.Reclaimed || !second.LeaseExpiresAt.Equal(b.clock.Now().Add(toolLease)) {
		t.Fatalf("reclaim lease = %v, want now+%v", second.LeaseExpiresAt, toolLease)
	}
	if second.RetainUntil.Before(first.RetainUntil) {
		t.Fatalf("reclaim shortened retention: %v -> %v", first.RetainUntil, second.RetainUntil)
	}

	// The repository floor: a reclaim asking for a shorter retention keeps
	// the longer one.
	b.clock.Advance(toolLease)
	repo := b.svc.Repository()
	before := b.row(t, toolScope, "k")
	rec, err := repo.Reclaim(ctx, idempotency.ClaimParams{
		OrganizationID: b.org, Scope: toolScope, Key: "k", RequestHash: hashA,
		LeaseToken: uuid.New(), Lease: time.Second, Retention: time.Second,
	})
	if err != nil || rec == nil {
		t.Fatalf("Reclaim = %v, %v", rec, err)
	}
	if !rec.RetainUntil.Equal(before.RetainUntil) {
		t.Fatalf("Reclaim with a short retention moved retain_until %v -> %v", before.RetainUntil, rec.RetainUntil)
	}
	if !rec.LeaseExpiresAt.Equal(b.clock.Now().Add(time.Second)) {
		t.Fatalf("Reclaim lease = %v, want now+1s", rec.LeaseExpiresAt)
	}
}

func TestRetentionIsRaisedToALongerLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := 30 * time.Hour // longer than the webhook retention of 24 h
	c := b.mustClaim(t, "webhook.nylas", "d-1", hashA, long)
	if !c.RetainUntil.Equal(c.LeaseExpiresAt) || !c.LeaseExpiresAt.Equal(c.ClaimedAt.Add(long)) {
		t.Fatalf("claim = lease %v retain %v, want both claimed_at+30h", c.LeaseExpiresAt, c.RetainUntil)
	}
	short := b.mustClaim(t, "webhook.nylas", "d-2", hashA, idempotency.WebhookLease)
	if !short.RetainUntil.Equal(short.ClaimedAt.Add(idempotency.WebhookRetention)) {
		t.Fatalf("retain_until = %v, want claimed_at+24h", short.RetainUntil)
	}
}

func TestToolClaimOutlivesAnApprovalWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	b.mustComplete(t, c, "sent")
	for _, wait := range []time.Duration{25 * time.Hour, 29 * 24 * time.Hour} {
		b.clock.Advance(wait - (b.clock.Now().Sub(c.ClaimedAt)))
		wantCompleted(t, b.read(t, toolScope, "k", hashA), "sent")
	}
	b.clock.Advance(30*24*time.Hour - b.clock.Now().Sub(c.ClaimedAt))
	if out := b.read(t, toolScope, "k", hashA); out.Kind != idempotency.KindAbsent {
		t.Fatalf("Read after 30 days = %v, want absent", out.Kind)
	}
}

func TestClaimReplacesARowPastItsRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.mustClaim(t, "webhook.nylas", "d", hashA, idempotency.WebhookLease)
	b.mustComplete(t, old, "old")
	b.clock.Advance(idempotency.WebhookRetention)
	// The sweeper has not run, and that must not matter: the expired row is
	// absent, even for a different hash.
	out := b.claim(t, "webhook.nylas", "d", hashB, idempotency.WebhookLease)
	if out.Kind != idempotency.KindClaimed || out.Claim.ID == old.ID || out.Claim.Reclaimed {
		t.Fatalf("Claim of an expired key = %+v, want a new claim", out)
	}
	rec := b.row(t, "webhook.nylas", "d")
	if rec.Status != idempotency.StatusProcessing || rec.RequestHash != hashB || rec.Response != nil || rec.ResourceID != "" {
		t.Fatalf("replaced row = %+v, want a fresh processing claim", rec)
	}
	// The old claim's holder is fenced off the new one.
	if ok, err := b.svc.Complete(context.Background(), old, answer("stale")); err != nil || ok {
		t.Fatalf("Complete with the expired claim = %v, %v", ok, err)
	}
}

func TestCompleteInsideCallerTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.mustClaim(t, toolScope, "k", hashA, toolLease)

	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) // a failed test must not leave the pool waiting on this connection
	if ok, err := b.svc.CompleteTx(ctx, tx, c, answer("rolled-back")); err != nil || !ok {
		t.Fatalf("CompleteTx = %v, %v", ok, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := b.row(t, toolScope, "k"); rec.Status != idempotency.StatusProcessing {
		t.Fatalf("after rollback status = %s, want processing", rec.Status)
	}

	tx, err = b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if ok, err := b.svc.CompleteTx(ctx, tx, c, answer("committed")); err != nil || !ok {
		t.Fatalf("CompleteTx = %v, %v", ok, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wantCompleted(t, b.read(t, toolScope, "k", hashA), "committed")
}

func TestStatementCounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	count := func(f func()) int64 {
		before := b.stmts.Counts().Statements
		f()
		return b.stmts.Counts().Statements - before
	}
	var c *idempotency.Claim
	if n := count(func() { c = b.mustClaim(t, toolScope, "k", hashA, toolLease) }); n != 1 {
		t.Errorf("new claim ran %d statements, want 1", n)
	}
	if n := count(func() { b.claim(t, toolScope, "k", hashA, toolLease) }); n != 2 {
		t.Errorf("processing answer ran %d statements, want 2", n)
	}
	b.clock.Advance(toolLease)
	if n := count(func() { c = b.mustClaim(t, toolScope, "k", hashA, toolLease) }); n != 3 {
		t.Errorf("reclaim ran %d statements, want 3", n)
	}
	if n := count(func() { b.mustComplete(t, c, "x") }); n != 1 {
		t.Errorf("complete ran %d statements, want 1", n)
	}
	if n := count(func() { wantCompleted(t, b.claim(t, toolScope, "k", hashA, toolLease), "x") }); n != 2 {
		t.Errorf("completed replay ran %d statements, want 2", n)
	}
	if n := count(func() { b.read(t, toolScope, "k", hashA) }); n != 1 {
		t.Errorf("read ran %d statements, want 1", n)
	}
}

// TestNamedStatementsArePreparedOnce runs every statement of the plane many
// times on one connection and finds each prepared once: pgx rewrites the
// named parameters (@id, @now...) to the same $n text on every call, so
// the statement cache keeps working and a call costs no extra round trip
// (TestStatementCounts counts those).
func TestNamedStatementsArePreparedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.pool.Config()
	cfg.MaxConns = 1 // pg_prepared_statements is per session
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c := newClock()
	svc := idempotency.NewService(pool, idempotency.Config{Clock: c.Clock()})
	for i := range 5 {
		key := fmt.Sprintf("k%d", i)
		out, err := svc.Claim(context.Background(), b.org, toolScope, key, hashA, toolLease)
		if err != nil || out.Kind != idempotency.KindClaimed {
			t.Fatalf("Claim(%q) = %v, %v; want claimed", key, out.Kind, err)
		}
		c.Advance(toolLease) // the next claim of key reclaims
		if out, err = svc.Claim(context.Background(), b.org, toolScope, key, hashA, toolLease); err != nil || out.Kind != idempotency.KindClaimed {
			t.Fatalf("reclaim of %q = %v, %v; want claimed", key, out.Kind, err)
		}
		if ok, err := svc.Complete(context.Background(), out.Claim, answer(key)); !ok || err != nil {
			t.Fatalf("Complete(%q) = %v, %v", key, ok, err)
		}
	}
	rows, err := pool.Query(context.Background(), `SELECT statement FROM pg_prepared_statements
		WHERE statement LIKE '%agent.idempotency_keys%' AND statement NOT LIKE '%pg_prepared_statements%'`)
	if err != nil {
		t.Fatal(err)
	}
	texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, text := range texts {
		seen[text]++
		if strings.Contains(text, "@") {
			t.Errorf("prepared with a named parameter left in it: %s", text)
		}
	}
	for text, n := range seen {
		if n != 1 {
			t.Errorf("prepared %d times: %s", n, text)
		}
	}
	// Insert, get, reclaim and complete: each once, however many calls.
	if len(texts) != 4 {
		t.Errorf("%d statements prepared on the connection, want 4 (insert, get, reclaim, complete):\n%s",
			len(texts), strings.Join(texts, "\n---\n"))
	}
}

func TestBadInputIsRefusedBeforeAnySQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		scope string
		key   string
		hash  string
		lease time.Duration
		want  error
	}{
		{"empty scope", "", "k", hashA, toolLease, idempotency.ErrInvalid},
		{"unknown scope", "surface.other", "k", hashA, toolLease, idempotency.ErrUnknownScope},
		{"bare tool prefix", "tool.", "k", hashA, toolLease, idempotency.ErrUnknownScope},
		{"empty key", toolScope, "", hashA, toolLease, idempotency.ErrInvalid},
		{"key over 255 bytes", toolScope, strings.Repeat("k", 256), hashA, toolLease, idempotency.ErrInvalid},
		{"key not UTF-8", toolScope, "k\xff", hashA, toolLease, idempotency.ErrInvalid},
		{"key with a control character", toolScope, "k\n1", hashA, toolLease, idempotency.ErrInvalid},
		{"key with DEL", toolScope, "k\x7f", hashA, toolLease, idempotency.ErrInvalid},
		{"empty hash", toolScope, "k", "", toolLease, idempotency.ErrInvalid},
		{"zero lease", toolScope, "k", hashA, 0, idempotency.ErrInvalid},
		{"negative lease", toolScope, "k", hashA, -time.Second, idempotency.ErrInvalid},
		{"lease over the maximum", toolScope, "k", hashA, idempotency.MaxLease + time.Second, idempotency.ErrInvalid},
	}
	for _, tt := range tests {
		before := b.stmts.Counts().Statements
		if _, err := b.svc.Claim(ctx, b.org, tt.scope, tt.key, tt.hash, tt.lease); !errors.Is(err, tt.want) {
			t.Errorf("%s: Claim error = %v, want %v", tt.name, err, tt.want)
		}
		if tt.lease > 0 && tt.lease <= idempotency.MaxLease {
			if _, err := b.svc.Read(ctx, b.org, tt.scope, tt.key, tt.hash); !errors.Is(err, tt.want) {
				t.Errorf("%s: Read error = %v, want %v", tt.name, err, tt.want)
			}
		}
		if n := b.stmts.Counts().Statements - before; n != 0 {
			t.Errorf("%s: ran %d statements, want 0", tt.name, n)
		}
	}
	if _, err := b.svc.Claim(ctx, uuid.Nil, toolScope, "k", hashA, toolLease); !errors.Is(err, idempotency.ErrInvalid) {
		t.Errorf("nil organization: error = %v, want ErrInvalid", err)
	}

	c := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	completions := []struct {
		name string
		c    idempotency.Completion
	}{
		{"neither response nor resource", idempotency.Completion{}},
		{"response is an array", idempotency.Completion{Response: json.RawMessage(`[1]`)}},
		{"response is a string", idempotency.Completion{Response: json.RawMessage(`"x"`)}},
		{"response is not JSON", idempotency.Completion{Response: json.RawMessage(`{"a":`)}},
		{"resource id without type", idempotency.Completion{ResourceID: "1"}},
		{"resource type without id", idempotency.Completion{ResourceType: "t", Response: json.RawMessage(`{}`)}},
	}
	for _, tt := range completions {
		before := b.stmts.Counts().Statements
		if ok, err := b.svc.Complete(ctx, c, tt.c); ok || !errors.Is(err, idempotency.ErrInvalid) {
			t.Errorf("%s: Complete = %v, %v; want false, ErrInvalid", tt.name, ok, err)
		}
		if n := b.stmts.Counts().Statements - before; n != 0 {
			t.Errorf("%s: ran %d statements, want 0", tt.name, n)
		}
	}
	if rec := b.row(t, toolScope, "k"); rec.Status != idempotency.StatusProcessing || rec.Response != nil {
		t.Fatalf("a refused completion wrote %+v", rec)
	}
	if n := b.rowCount(t); n != 1 {
		t.Fatalf("rows = %d, want only the one valid claim", n)
	}
}

func TestRetentionRegistry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		scope string
		want  time.Duration
		err   bool
	}{
		{"tool.email.send", 30 * 24 * time.Hour, false},
		{"tool.crm.company_lookup", 30 * 24 * time.Hour, false},
		{"webhook.nylas", 24 * time.Hour, false},
		{"webhook.provider.acme", 24 * time.Hour, false},
		{"surface.saved_search.start", 24 * time.Hour, false},
		{"surface.saved_search.other", 0, true},
		{"tool.", 0, true},
		{"tool..x", 0, true},
		{"tool.Email", 0, true},
		{"webhook", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := idempotency.Retention(tt.scope)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("Retention(%q) = %v, %v; want %v, error %v", tt.scope, got, err, tt.want, tt.err)
		}
		if tt.err && !errors.Is(err, idempotency.ErrUnknownScope) {
			t.Errorf("Retention(%q) error = %v, want ErrUnknownScope", tt.scope, err)
		}
	}
}

// The database rejects what the service refuses, so no other writer can
// store a claim the plane would misread.
func TestTableConstraints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	insert := func(pool *pgxpool.Pool, status string, lease, retain string, response any, rtype, rid any) error {
		_, err := pool.Exec(ctx, `INSERT INTO agent.idempotency_keys
			(id, organization_id, scope, key, request_hash, status, lease_token, claimed_at, lease_expires_at, retain_until, response, resource_type, resource_id)
			VALUES ($1, $2, 'tool.x', $3, 'h', $4, $5, now(), now() + $6::interval, now() + $7::interval, $8, $9, $10)`,
			uuid.New(), b.org, uuid.NewString(), status, uuid.New(), lease, retain, response, rtype, rid)
		return err
	}
	bad := []struct {
		name string
		err  error
	}{
		{"retention shorter than lease", insert(b.pool, "processing", "1 hour", "1 minute", nil, nil, nil)},
		{"completed without answer", insert(b.pool, "completed", "1 minute", "1 hour", nil, nil, nil)},
		{"unknown status", insert(b.pool, "done", "1 minute", "1 hour", `{}`, nil, nil)},
		{"array response", insert(b.pool, "completed", "1 minute", "1 hour", `[]`, nil, nil)},
		{"resource id without type", insert(b.pool, "completed", "1 minute", "1 hour", nil, nil, "1")},
	}
	for _, tt := range bad {
		if tt.err == nil {
			t.Errorf("%s: insert succeeded, want a check violation", tt.name)
		}
	}
	if err := insert(b.pool, "completed", "1 minute", "1 hour", nil, "t", "1"); err != nil {
		t.Fatalf("valid completed row refused: %v", err)
	}
}

func TestLargeResponseIsStoredAsAResourceRef(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	svc := idempotency.NewService(b.pool, idempotency.Config{Clock: b.clock.Clock(), MaxResponseBytes: 64})
	body := func(n int) json.RawMessage { // a JSON object of exactly n bytes
		return json.RawMessage(`{"b":"` + strings.Repeat("x", n-8) + `"}`)
	}
	claim := func(key string) *idempotency.Claim {
		out, err := svc.Claim(ctx, b.org, toolScope, key, hashA, toolLease)
		if err != nil || out.Kind != idempotency.KindClaimed {
			t.Fatalf("Claim(%s) = %v, %v", key, out.Kind, err)
		}
		return out.Claim
	}

	large := claim("large")
	ok, err := svc.Complete(ctx, large, idempotency.Completion{ResourceType: "snapshot", ResourceID: "s-1", Response: body(65)})
	if err != nil || !ok {
		t.Fatalf("Complete(65 bytes) = %v, %v", ok, err)
	}
	out, err := svc.Claim(ctx, b.org, toolScope, "large", hashA, toolLease)
	if err != nil || out.Kind != idempotency.KindCompleted {
		t.Fatalf("replay = %v, %v", out.Kind, err)
	}
	if out.Ref == nil || *out.Ref != (idempotency.ResourceRef{Type: "snapshot", ID: "s-1"}) {
		t.Fatalf("replay Ref = %v, want snapshot/s-1", out.Ref)
	}
	if out.ResourceType != "snapshot" || out.ResourceID != "s-1" {
		t.Fatalf("replay resource = %s/%s, want snapshot/s-1", out.ResourceType, out.ResourceID)
	}
	if strings.Contains(string(out.Response), "xxxx") || !strings.Contains(string(out.Response), `"resource_ref"`) {
		t.Fatalf("stored response = %s, want the reference instead of the body", out.Response)
	}

	atLimit := claim("at-limit")
	if ok, err := svc.Complete(ctx, atLimit, idempotency.Completion{Response: body(64)}); err != nil || !ok {
		t.Fatalf("Complete(64 bytes) = %v, %v", ok, err)
	}
	out, _ = svc.Read(ctx, b.org, toolScope, "at-limit", hashA)
	if out.Ref != nil || !strings.Contains(string(out.Response), "xxxx") {
		t.Fatalf("a response at the limit = %s (ref %v), want it inline", out.Response, out.Ref)
	}

	anonymous := claim("anonymous")
	if ok, err := svc.Complete(ctx, anonymous, idempotency.Completion{Response: body(65)}); ok || !errors.Is(err, idempotency.ErrInvalid) {
		t.Fatalf("Complete(large, no resource) = %v, %v; want false, ErrInvalid", ok, err)
	}
	if rec := b.row(t, toolScope, "anonymous"); rec.Status != idempotency.StatusProcessing {
		t.Fatalf("refused completion wrote status %s", rec.Status)
	}
}

type recordingObserver struct {
	mu        sync.Mutex
	claims    []string
	fenceLost []string
}

func (o *recordingObserver) ObserveClaim(scope, kind string, reclaimed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := scope + " " + kind
	if reclaimed {
		s += " reclaimed"
	}
	o.claims = append(o.claims, s)
}

func (o *recordingObserver) ObserveFenceLost(scope, op string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fenceLost = append(o.fenceLost, scope+" "+op)
}

func TestObserverSeesOutcomesAndLostFences(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	obs := &recordingObserver{}
	svc := idempotency.NewService(b.pool, idempotency.Config{Clock: b.clock.Clock(), Observer: obs})
	claim := func(hash string) idempotency.Outcome {
		out, err := svc.Claim(ctx, b.org, toolScope, "k", hash, toolLease)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	stale := claim(hashA).Claim
	claim(hashA)
	claim(hashB)
	b.clock.Advance(toolLease)
	owner := claim(hashA).Claim
	if ok, _ := svc.Complete(ctx, stale, answer("stale")); ok {
		t.Fatal("stale completion succeeded")
	}
	if ok, _ := svc.Release(ctx, stale); ok {
		t.Fatal("stale release succeeded")
	}
	if ok, err := svc.Complete(ctx, owner, answer("x")); !ok || err != nil {
		t.Fatal(ok, err)
	}
	claim(hashA)
	if _, err := svc.Claim(ctx, b.org, "", "k", hashA, toolLease); err == nil {
		t.Fatal("empty scope accepted")
	}
	wantClaims := []string{
		toolScope + " claimed", toolScope + " processing", toolScope + " conflict",
		toolScope + " claimed reclaimed", toolScope + " completed",
	}
	wantLost := []string{toolScope + " complete", toolScope + " release"}
	if fmt.Sprint(obs.claims) != fmt.Sprint(wantClaims) || fmt.Sprint(obs.fenceLost) != fmt.Sprint(wantLost) {
		t.Fatalf("observed claims %q, fences lost %q; want %q, %q", obs.claims, obs.fenceLost, wantClaims, wantLost)
	}
}

// flakyDB fails the first n statements (Exec or QueryRow: a release
// returns whether a waiter marked the claim) the way a cut connection
// does, then passes every statement to the real pool.
type flakyDB struct {
	*pgxpool.Pool
	failures atomic.Int32
	execs    atomic.Int32
}

var errCut = errors.New("write tcp 127.0.0.1:5432: connection reset by peer")

func (f *flakyDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	f.execs.Add(1)
	if f.failures.Add(-1) >= 0 {
		return pgconn.CommandTag{}, errCut
	}
	return f.Pool.Exec(ctx, sql, args...)
}

func (f *flakyDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	f.execs.Add(1)
	if f.failures.Add(-1) >= 0 {
		return errRow{errCut}
	}
	return f.Pool.QueryRow(ctx, sql, args...)
}

func TestReleaseSurvivesACutConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	db := &flakyDB{Pool: b.pool}
	svc := idempotency.NewService(db, idempotency.Config{Clock: b.clock.Clock()})
	c := b.mustClaim(t, toolScope, "k", hashA, toolLease)

	db.failures.Store(1)
	if ok, err := svc.Release(ctx, c); !ok || err != nil {
		t.Fatalf("Release over a connection cut once = %v, %v; want true, nil", ok, err)
	}
	if n := b.rowCount(t); n != 0 {
		t.Fatalf("rows after the release = %d, want 0: the key would stay blocked for a lease", n)
	}

	// A connection that stays cut is reported, after a bounded number of
	// attempts, and the claim is left for its lease to pass.
	c = b.mustClaim(t, toolScope, "k2", hashA, toolLease)
	db.failures.Store(100)
	db.execs.Store(0)
	if ok, err := svc.Release(ctx, c); ok || err == nil {
		t.Fatalf("Release over a dead connection = %v, %v; want false and the error", ok, err)
	}
	if n := db.execs.Load(); n < 2 || n > 5 {
		t.Fatalf("Release made %d attempts, want a few", n)
	}
}

// lostReplyDB runs every statement on the real pool, but for those whose
// text starts with one of the prefixes in cut: it runs that statement to
// its commit on a connection of its own, then cuts that connection (closes
// its socket) and answers the caller as a connection reset would, so the
// caller never learns that the statement committed. It cuts once per
// armed count.
type lostReplyDB struct {
	*pgxpool.Pool
	prefix string
	armed  atomic.Int32
	cuts   atomic.Int32
}

func (f *lostReplyDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !strings.HasPrefix(strings.TrimSpace(sql), f.prefix) || f.armed.Add(-1) < 0 {
		return f.Pool.QueryRow(ctx, sql, args...)
	}
	conn, err := f.Pool.Acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return errRow{err}
	}
	// The statement committed; the reply is lost with the connection.
	_ = conn.Conn().PgConn().Conn().Close()
	f.cuts.Add(1)
	return errRow{&net.OpError{Op: "read", Net: "unix", Err: syscall.ECONNRESET}}
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// TestClaimReleasesTheClaimWhoseInsertReplyWasLost is point 3 of issue 11:
// the plane mints a claim's id and token before its insert, and when the
// reply is lost after the insert committed, Claim releases that exact
// claim before it returns the error. Without it the key is held by nobody
// and every retry meets a live lease (a webhook redelivery would be dropped
// as a duplicate and lost; a saved-search start answers 409 for a lease).
// The same for a reclaim whose reply is lost.
func TestClaimReleasesTheClaimWhoseInsertReplyWasLost(t *testing.T) {
	t.Parallel()
	for _, scope := range []string{idempotency.ScopeSavedSearchStart, "webhook.acme"} {
		t.Run(scope, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			db := &lostReplyDB{Pool: b.pool, prefix: "INSERT INTO agent.idempotency_keys"}
			svc := idempotency.NewService(db, idempotency.Config{Clock: b.clock.Clock()})

			db.armed.Store(1)
			if _, err := svc.Claim(ctx, b.org, scope, "k", hashA, 30*time.Second); err == nil {
				t.Fatal("Claim over a cut connection: no error, want the transport error")
			}
			if db.cuts.Load() != 1 {
				t.Fatalf("cuts = %d, want 1: the insert did not run", db.cuts.Load())
			}
			if n := b.rowCount(t); n != 0 {
				t.Fatalf("claims after the lost reply = %d, want 0: the orphan blocks the key for a lease", n)
			}
			// The retry proceeds at once, well within the lease.
			if out := b.claim(t, scope, "k", hashA, 30*time.Second); out.Kind != idempotency.KindClaimed {
				t.Fatalf("retry after the lost reply = %v, want claimed", out.Kind)
			}

			// A reclaim whose reply is lost: the row keeps its id and now
			// holds the token the lost statement carried; it is released.
			b.clock.Advance(31 * time.Second)
			db.prefix = "UPDATE agent.idempotency_keys"
			db.armed.Store(1)
			if _, err := svc.Claim(ctx, b.org, scope, "k", hashA, 30*time.Second); err == nil {
				t.Fatal("reclaim over a cut connection: no error, want the transport error")
			}
			if db.cuts.Load() != 2 {
				t.Fatalf("cuts = %d, want 2: the reclaim did not run", db.cuts.Load())
			}
			if n := b.rowCount(t); n != 0 {
				t.Fatalf("claims after the lost reclaim reply = %d, want 0", n)
			}
			if out := b.claim(t, scope, "k", hashA, 30*time.Second); out.Kind != idempotency.KindClaimed || out.Claim.Reclaimed {
				t.Fatalf("retry after the lost reclaim reply = %v (reclaimed %v), want a new claim", out.Kind, out.Claim != nil && out.Claim.Reclaimed)
			}
		})
	}
}

// TestOrphanReleaseNeverTouchesAnotherWorkersClaim: the release after a
// lost reply is fenced by the token the lost statement carried, so when
// that statement never wrote (the key was someone else's), the other
// worker's claim stays.
func TestOrphanReleaseNeverTouchesAnotherWorkersClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	held := b.mustClaim(t, toolScope, "k", hashA, toolLease)
	db := &lostReplyDB{Pool: b.pool, prefix: "INSERT INTO agent.idempotency_keys"}
	svc := idempotency.NewService(db, idempotency.Config{Clock: b.clock.Clock()})
	db.armed.Store(1)
	if _, err := svc.Claim(ctx, b.org, toolScope, "k", hashA, toolLease); err == nil {
		t.Fatal("Claim over a cut connection: no error")
	}
	if rec := b.row(t, toolScope, "k"); rec.LeaseToken != held.LeaseToken || rec.Status != idempotency.StatusProcessing {
		t.Fatalf("the holder's claim = %s/%s, want it untouched (token %s)", rec.Status, rec.LeaseToken, held.LeaseToken)
	}
}

// TestQueuedCompletionAbortsItsTransactionWhenTheFenceMoved pipelines a
// completion with another write and COMMIT in one batch, the way a
// saved-search start does: with the fence held, both commit; with the
// lease taken over, the completion raises ErrFenceLost, the COMMIT never
// runs, the other write is rolled back and the new owner's claim is
// untouched.
func TestQueuedCompletionAbortsItsTransactionWhenTheFenceMoved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	obs := &recordingObserver{}
	svc := idempotency.NewService(b.pool, idempotency.Config{Clock: b.clock.Clock(), Observer: obs})
	if _, err := b.pool.Exec(ctx, `CREATE TABLE effects (key text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	// pipeline completes claim with v and records the effect v in one
	// transaction of two round trips, as admission does.
	pipeline := func(claim *idempotency.Claim, v string) error {
		conn, err := b.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, "begin"); err != nil {
			t.Fatal(err)
		}
		batch := &pgx.Batch{}
		if _, err := svc.QueueComplete(batch, claim, answer(v)); err != nil {
			t.Fatal(err)
		}
		batch.Queue(`INSERT INTO effects VALUES ($1)`, v)
		batch.Queue("commit")
		err = conn.SendBatch(ctx, batch).Close()
		if conn.Conn().PgConn().TxStatus() != 'I' {
			if _, rerr := conn.Exec(ctx, "rollback"); rerr != nil {
				t.Fatal(rerr)
			}
		}
		return err
	}
	effects := func() int {
		var n int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM effects`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	held := b.mustClaim(t, toolScope, "held", hashA, toolLease)
	if err := pipeline(held, "held"); err != nil {
		t.Fatalf("queued completion under a held fence: %v", err)
	}
	wantCompleted(t, b.claim(t, toolScope, "held", hashA, toolLease), "held")
	if n := effects(); n != 1 {
		t.Fatalf("%d effects after the committed batch, want 1", n)
	}

	stale := b.mustClaim(t, toolScope, "moved", hashA, toolLease)
	b.clock.Advance(toolLease)
	owner := b.mustClaim(t, toolScope, "moved", hashA, toolLease)
	err := pipeline(stale, "stale")
	if !errors.Is(err, idempotency.ErrFenceLost) {
		t.Fatalf("queued completion after the lease moved = %v, want ErrFenceLost", err)
	}
	if n := effects(); n != 1 {
		t.Errorf("%d effects after the aborted batch, want 1 (its write rolled back)", n)
	}
	if rec := b.row(t, toolScope, "moved"); rec.Status != idempotency.StatusProcessing || rec.LeaseToken != owner.LeaseToken {
		t.Errorf("claim after the stale completion = %s under %s, want processing under the owner's token", rec.Status, rec.LeaseToken)
	}
	if len(obs.fenceLost) != 1 || obs.fenceLost[0] != toolScope+" complete" {
		t.Errorf("observed lost fences %v, want one complete", obs.fenceLost)
	}
	if _, err := svc.QueueComplete(&pgx.Batch{}, owner, idempotency.Completion{}); !errors.Is(err, idempotency.ErrInvalid) {
		t.Errorf("QueueComplete of an empty completion = %v, want ErrInvalid", err)
	}
}
