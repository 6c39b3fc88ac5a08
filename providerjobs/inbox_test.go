package providerjobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// inboxCounter is an Observer of the inbox on top of counter.
type inboxCounter struct {
	counter
	applied, copies, auditFailures atomic.Int64
}

func (c *inboxCounter) ObserveApplied(string, string)      { c.applied.Add(1) }
func (c *inboxCounter) ObserveCopy(string, string)         { c.copies.Add(1) }
func (c *inboxCounter) ObserveAuditFailure(string, string) { c.auditFailures.Add(1) }
func (c *inboxCounter) ObserveInbox(int64, time.Duration)  {}
func (b *bundle) withService(cfg Config) *Service {
	return New(b.pool, b.plane, cfg)
}

// TestReceiveLandsTheArrivalAndAppliesItBeforeAnswering: the arrival is
// stored under its identity with its content, and the fast path applies it
// and finishes it in the same transaction.
func TestReceiveLandsTheArrivalAndAppliesItBeforeAnswering(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	job := b.seedJob("j-1")
	d := delivery(job, "d-1", StatusSucceeded)
	out, err := b.svc.Receive(context.Background(), d)
	if err != nil || !out.Accepted || !out.Applied {
		t.Fatalf("Receive = %+v, %v; want accepted and applied", out, err)
	}
	e := b.arrival("d-1")
	if e.Status != InboxApplied || e.AppliedBy != ByHandler || e.JobID != job.ID || e.OrganizationID != b.org ||
		e.RequestHash != RequestHash(d.Body) || e.PathJobID != job.ID.String() || e.Update.Status != StatusSucceeded ||
		e.Update.ProviderJobID != job.ProviderJobID || e.FinishedAt == nil || !e.ReceivedAt.Equal(b.clk.Now()) {
		t.Errorf("arrival = %+v, want it applied by the handler, with the delivery's identity and content", e)
	}
	b.wantCount(1, "arrivals", `SELECT count(*) FROM agent.provider_inbox`)
}

// TestApplierFinishesAnArrivalWhoseHandlerDied is the scenario of issue 11:
// a handler landed a delivery, claimed it and died (or stalled) before
// completing. Its redelivery is a copy (acknowledged: the arrival is
// durable), and once the lease passes the applier applies the arrival once;
// the dead handler's fence is gone.
func TestApplierFinishesAnArrivalWhoseHandlerDied(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	job := b.seedJob("j-dead")
	d := delivery(job, "d-dead", StatusSucceeded)
	e, fresh, err := b.svc.land(context.Background(), d, b.org, job.ID)
	if err != nil || !fresh {
		t.Fatalf("land = %v, %v; want a fresh arrival", fresh, err)
	}
	dead, err := b.plane.Claim(context.Background(), b.org, Scope("acme"), d.DeliveryID, e.RequestHash, idempotency.WebhookLease)
	if err != nil || dead.Kind != idempotency.KindClaimed {
		t.Fatalf("the dead handler's claim = %v, %v", dead.Kind, err)
	}

	// Inside the lease: the copy is acknowledged, the applier leaves it.
	b.clk.Advance(idempotency.WebhookLease - time.Second)
	if out, err := b.svc.Receive(context.Background(), d); err != nil || out.Reason != DropDuplicate {
		t.Fatalf("copy inside the lease = %+v, %v; want dropped duplicate", out, err)
	}
	if rep, err := b.svc.ApplyPending(context.Background(), 10); err != nil || rep.Taken != 0 {
		t.Fatalf("ApplyPending inside the lease = %+v, %v; want nothing taken", rep, err)
	}
	// Past the arrival's lease the applier takes it; the claim's lease
	// passes a moment later (it was taken after the landing), so the first
	// attempt may meet it live and back off until it passes.
	b.clk.Advance(2 * time.Second)
	for range 3 {
		if _, err := b.svc.ApplyPending(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
		b.clk.Advance(time.Second)
	}
	if got := b.job(job.ID); got.Status != StatusSucceeded || got.Version != 2 {
		t.Fatalf("job = %+v, want succeeded, applied once (version 2)", got)
	}
	if e := b.arrival("d-dead"); e.Status != InboxApplied || e.AppliedBy != ByApplier {
		t.Errorf("arrival = %+v, want applied by the applier", e)
	}
	if ok, err := b.plane.Complete(context.Background(), dead.Claim, idempotency.Completion{Response: []byte(`{"stale":true}`)}); ok || err != nil {
		t.Errorf("the dead handler's Complete = %v, %v; want false: its fence moved on", ok, err)
	}
	// Later copies change nothing.
	if out, err := b.svc.Receive(context.Background(), d); err != nil || out.Reason != DropDuplicate {
		t.Fatalf("copy after the apply = %+v, %v; want dropped duplicate", out, err)
	}
	if got := b.job(job.ID); got.Version != 2 {
		t.Errorf("job version = %d, want 2", got.Version)
	}
}

// TestAppliedAtMostOnceWhateverRaces: many arrivals whose handlers are all
// gone, taken by four appliers at once while their copies arrive and a
// late handler wakes for each. Every job is applied exactly once.
func TestAppliedAtMostOnceWhateverRaces(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const n = 40
	var jobs []*Job
	var ds []Delivery
	for i := range n {
		job := b.seedJob(fmt.Sprintf("j-race-%d", i))
		d := delivery(job, fmt.Sprintf("d-race-%d", i), StatusSucceeded)
		if _, fresh, err := b.svc.land(context.Background(), d, b.org, job.ID); err != nil || !fresh {
			t.Fatalf("land: %v, %v", fresh, err)
		}
		jobs, ds = append(jobs, job), append(ds, d)
	}
	b.clk.Advance(idempotency.WebhookLease + time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for range 4 {
		wg.Go(func() {
			for range 5 {
				if _, err := b.svc.ApplyPending(context.Background(), 7); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, d := range ds {
		wg.Go(func() {
			if _, err := b.svc.Receive(context.Background(), d); err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			// The handler that landed it wakes late and applies it.
			e, err := b.svc.GetArrival(context.Background(), b.org, "acme", d.DeliveryID)
			if err == nil {
				_, err = b.svc.applyEntry(context.Background(), e, ByHandler)
				var inFlight *errInFlight
				if errors.As(err, &inFlight) {
					err = nil
				}
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, job := range jobs {
		if got := b.job(job.ID); got.Version != 2 || got.Status != StatusSucceeded {
			t.Errorf("job %d = %+v, want succeeded and applied exactly once (version 2)", i, got)
		}
	}
	b.wantCount(0, "arrivals not applied", `SELECT count(*) FROM agent.provider_inbox WHERE status <> 'applied'`)
	b.wantCount(0, "claims left processing", `SELECT count(*) FROM agent.idempotency_keys WHERE status <> 'completed'`)
}

// TestADeliveryOnAnotherJobsPathIsNeverApplied keeps issue 24.3 fixed
// now that a provider job id is unique per organization (issue 36.6).
// Before 24.3, A's delivery posted to the path of B's job was applied
// there, the genuine copy on A's path was dropped, A's job stayed pending,
// and the drop was recorded under B. Now the path names the job and the
// body must name it too: A's delivery on the path of B's job (another
// provider job id) drops as job_mismatch, recorded under B's job, whose
// path it was posted on, and is never landed, so the genuine copy is
// applied to A's job; B's job is untouched.
func TestADeliveryOnAnotherJobsPathIsNeverApplied(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	jobA := b.seedJob("a-own")
	orgB := uuid.New()
	jobB, created, err := b.svc.Register(ctx, orgB, RegisterParams{RunID: b.seedRun(orgB), Provider: "acme", ProviderJobID: "b-own"})
	if err != nil || !created {
		t.Fatalf("B's registration of its own job = %v, %v", created, err)
	}

	d := delivery(jobA, "d-a", StatusSucceeded)
	onB := d
	onB.JobID = jobB.ID.String()
	if out, err := b.svc.Receive(ctx, onB); err != nil || out.Reason != DropJobMismatch || out.JobID != jobB.ID {
		t.Fatalf("A's delivery posted to B's path = %+v, %v; want dropped job_mismatch on B's job", out, err)
	}
	if out, err := b.svc.Receive(ctx, d); err != nil || !out.Accepted || !out.Applied {
		t.Fatalf("the genuine copy on A's path = %+v, %v; want accepted and applied", out, err)
	}
	if got := b.job(jobA.ID); got.Status != StatusSucceeded || got.Version != 2 {
		t.Errorf("A's job = %+v, want succeeded, applied once", got)
	}
	if got, err := b.svc.Get(ctx, orgB, jobB.ID); err != nil || got.Version != 1 || got.Status != StatusPending {
		t.Errorf("B's job = %+v, %v; want it untouched", got, err)
	}
	var reason, pathJobID string
	var org, job uuid.UUID
	if err := b.pool.QueryRow(ctx, `SELECT reason, path_job_id, organization_id, job_id FROM agent.webhook_drops
		WHERE delivery_id = 'd-a'`).Scan(&reason, &pathJobID, &org, &job); err != nil ||
		reason != string(DropJobMismatch) || pathJobID != jobB.ID.String() || org != orgB || job != jobB.ID {
		t.Errorf("drop audit = %s on path %s of %s's job %s, %v; want job_mismatch recorded under B's job, whose path it came on",
			reason, pathJobID, org, job, err)
	}
	if drops, err := b.svc.ListDrops(ctx, orgB, jobB.ID); err != nil || len(drops) != 1 || drops[0].Reason != DropJobMismatch {
		t.Errorf("B's drops = %+v, %v; want the job_mismatch", drops, err)
	}
	if drops, _, err := NewAudit(b.pool).Drops(ctx, orgB, jobB.ID, 0, ""); err != nil || len(drops) != 1 ||
		drops[0].Reason != DropJobMismatch || drops[0].DeliveryID != "d-a" || len(drops[0].RequestHash) != 64 {
		t.Errorf("B's drops in the audit = %+v, %v; want the job_mismatch of d-a with its body's hash", drops, err)
	}
	if drops, err := b.svc.ListDrops(ctx, b.org, jobA.ID); err != nil || len(drops) != 0 {
		t.Errorf("A's drops = %+v, %v; want none", drops, err)
	}
	// The misdirected delivery was never landed: A's arrival is the
	// genuine copy's, and B has none.
	if n := b.count(`SELECT count(*) FROM agent.provider_inbox WHERE organization_id = $1`, orgB); n != 0 {
		t.Errorf("B has %d arrivals, want 0", n)
	}
	if e := b.arrival("d-a"); e.PathJobID != jobA.ID.String() || e.Status != InboxApplied {
		t.Errorf("A's arrival = %+v, want the genuine copy's, applied", e)
	}
}

// TestCopiesAreCountedNotMultiplied is point 5: many copies of one
// delivery make one arrival, one audit row per reason and a counter. A
// delivery naming no job is not landed, and its copies make one audit row.
func TestCopiesAreCountedNotMultiplied(t *testing.T) {
	t.Parallel()
	obs := &inboxCounter{counter: counter{n: map[string]int{}}}
	b := setup(t, setupOpts{})
	svc := b.withService(Config{Observer: obs})
	job := b.seedJob("j-copies")
	d := delivery(job, "d-copies", StatusRunning)
	unknown := d
	unknown.DeliveryID, unknown.JobID = "d-unknown", uuid.NewString() // a path naming no job
	const copies = 300
	for range copies + 1 {
		if _, err := svc.Receive(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		if out, err := svc.Receive(context.Background(), unknown); err != nil || out.Reason != DropUnknownJob {
			t.Fatalf("unknown = %+v, %v; want dropped unknown_job", out, err)
		}
	}
	b.wantCount(1, "arrivals", `SELECT count(*) FROM agent.provider_inbox`)
	if n := b.count(`SELECT count(*) FROM agent.webhook_drops`); n != 2 {
		t.Errorf("%d audit rows, want 2: the first duplicate, and the unknown job's unknown_job", n)
	}
	c, err := svc.ArrivalCopies(context.Background(), b.org, b.arrival("d-copies").ID)
	if err != nil || c.Duplicates != copies || c.LastAt == nil {
		t.Errorf("copies = %+v, %v; want %d duplicates", c, err, copies)
	}
	if obs.copies.Load() != copies || obs.get("acme/duplicate") != copies || obs.get("acme/unknown_job") != copies+1 ||
		obs.applied.Load() != 1 {
		t.Errorf("observed %d copies, %d duplicates, %d unknown_job, %d applied; want %d, %d, %d, 1",
			obs.copies.Load(), obs.get("acme/duplicate"), obs.get("acme/unknown_job"), obs.applied.Load(), copies, copies, copies+1)
	}
	if got := b.job(job.ID); got.Version != 2 {
		t.Errorf("job version = %d, want 2", got.Version)
	}
}

// TestCopiesAreCountedByTheirReason: a copy with the arrival's body counts
// as a duplicate and one with another body as a hash mismatch, each on its
// own counter, and the first copy of each reason alone writes the audit.
func TestCopiesAreCountedByTheirReason(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	job := b.seedJob("j-reasons")
	d := delivery(job, "d-reasons", StatusRunning)
	other := d
	other.Body = append([]byte(nil), d.Body...)
	other.Body = append(other.Body, ' ')
	if out, err := b.svc.Receive(context.Background(), d); err != nil || !out.Accepted {
		t.Fatalf("first delivery = %+v, %v; want accepted", out, err)
	}
	for range 3 {
		if out, err := b.svc.Receive(context.Background(), other); err != nil || out.Reason != DropHashMismatch {
			t.Fatalf("another body = %+v, %v; want dropped hash_mismatch", out, err)
		}
	}
	for range 2 {
		if out, err := b.svc.Receive(context.Background(), d); err != nil || out.Reason != DropDuplicate {
			t.Fatalf("the same body = %+v, %v; want dropped duplicate", out, err)
		}
	}
	c, err := b.svc.ArrivalCopies(context.Background(), b.org, b.arrival("d-reasons").ID)
	if err != nil || c.Duplicates != 2 || c.HashMismatches != 3 || c.PathMismatches != 0 {
		t.Errorf("copies = %+v, %v; want 2 duplicates and 3 hash mismatches", c, err)
	}
	for _, reason := range []DropReason{DropHashMismatch, DropDuplicate} {
		b.wantCount(1, string(reason)+" audit rows",
			`SELECT count(*) FROM agent.webhook_drops WHERE delivery_id = 'd-reasons' AND reason = $1`, string(reason))
	}
}

// TestAckNeverDependsOnTheDropAudit is point 6 of issue 12: when the audit
// cannot be written, every landed delivery is still answered, the failure
// is logged and counted, and the arrival records the reason. A delivery
// that is not landed (it names no job) has its drop as its only record: it
// is an error then, so the provider redelivers, and the redelivery after
// the audit recovers is recorded once.
func TestAckNeverDependsOnTheDropAudit(t *testing.T) {
	t.Parallel()
	obs := &inboxCounter{counter: counter{n: map[string]int{}}}
	b := setup(t, setupOpts{})
	svc := b.withService(Config{Observer: obs, beforeAudit: func() error { return errors.New("audit down") }})
	job := b.seedJob("j-audit")
	d := delivery(job, "d-audit", StatusRunning)
	if out, err := svc.Receive(context.Background(), d); err != nil || !out.Accepted {
		t.Fatalf("first delivery = %+v, %v; want accepted", out, err)
	}
	if out, err := svc.Receive(context.Background(), d); err != nil || out.Reason != DropDuplicate {
		t.Errorf("duplicate with the audit failing = %+v, %v; want dropped duplicate, no error", out, err)
	}
	if obs.auditFailures.Load() != 1 {
		t.Errorf("audit failures counted = %d, want 1", obs.auditFailures.Load())
	}
	b.wantCount(0, "audit rows", `SELECT count(*) FROM agent.webhook_drops`)
	unknown := d
	unknown.DeliveryID, unknown.JobID = "d-unknown", "not-a-job"
	if out, err := svc.Receive(context.Background(), unknown); err == nil {
		t.Errorf("unknown job with the audit failing = %+v; want an error: nothing records it", out)
	}
	healed := b.withService(Config{Observer: obs})
	for range 2 {
		if out, err := healed.Receive(context.Background(), unknown); err != nil || out.Reason != DropUnknownJob {
			t.Errorf("the redelivery = %+v, %v; want dropped unknown_job", out, err)
		}
	}
	b.wantCount(1, "unknown_job rows", `SELECT count(*) FROM agent.webhook_drops WHERE delivery_id = 'd-unknown' AND reason = 'unknown_job'`)
}

// cutInboxDB fails the inbox insert the way a database outage does, before
// anything is stored.
type cutInboxDB struct {
	DB
	down atomic.Bool
}

func (c *cutInboxDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if c.down.Load() && sql == inboxInsert {
		return errRow{errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")}
	}
	return c.DB.QueryRow(ctx, sql, args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// TestOutageStoresNothingHalfWay: a delivery the database cannot land is
// an error (the edge answers 503) and leaves nothing; its redelivery after
// the outage is applied once.
func TestOutageStoresNothingHalfWay(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	db := &cutInboxDB{DB: b.pool}
	svc := New(db, b.plane, Config{})
	job := b.seedJob("j-outage")
	d := delivery(job, "d-outage", StatusSucceeded)
	db.down.Store(true)
	if _, err := svc.Receive(context.Background(), d); err == nil {
		t.Fatal("Receive with the database down: no error, want one (503 at the edge)")
	}
	if n := b.count(`SELECT (SELECT count(*) FROM agent.provider_inbox) + (SELECT count(*) FROM agent.idempotency_keys)
		+ (SELECT count(*) FROM agent.webhook_drops)`); n != 0 {
		t.Errorf("%d rows after the outage, want none", n)
	}
	db.down.Store(false)
	for i := range 3 {
		out, err := svc.Receive(context.Background(), d)
		if err != nil || (i == 0) != out.Accepted {
			t.Fatalf("redelivery %d = %+v, %v", i, out, err)
		}
	}
	if got := b.job(job.ID); got.Version != 2 || got.Status != StatusSucceeded {
		t.Errorf("job = %+v, want applied once", got)
	}
}

// TestRunApplierAppliesWhenWokenAndReturnsWithItsContext runs the
// background applier as serve does: woken, it applies an arrival whose
// handler died, and it returns nil once its context ends. The package's
// TestMain (pgtest.MainNoLeaks) then fails the tests if anything it
// started is still running.
func TestRunApplierAppliesWhenWokenAndReturnsWithItsContext(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	job := b.seedJob("j-woken")
	if _, fresh, err := b.svc.land(context.Background(), delivery(job, "d-woken", StatusSucceeded), b.org, job.ID); err != nil || !fresh {
		t.Fatalf("land = %v, %v; want a fresh arrival", fresh, err)
	}
	b.clk.Advance(idempotency.WebhookLease + time.Second) // the handler is gone

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := make(chan struct{}, 1)
	done := make(chan error, 1)
	// An hour between polls: only the wake can make this pass.
	go func() {
		done <- b.svc.RunApplier(ctx, ApplierConfig{Interval: time.Hour, MaxIdleBackoff: time.Hour, Wake: wake})
	}()
	wake <- struct{}{}
	deadline := time.Now().Add(30 * time.Second)
	for b.job(job.ID).Status != StatusSucceeded {
		if time.Now().After(deadline) {
			t.Fatalf("job = %+v 30 s after the wake, want succeeded", b.job(job.ID))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RunApplier = %v after its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunApplier still running 10 s after its context ended")
	}
}

// TestAFailingApplierPassBacksOffDoublingToItsCap: while its database is
// gone (here a closed pool), the applier waits after each failed pass
// twice the wait before, from twice the Interval up to MaxIdleBackoff (a
// stub clock records the waits), and logs each failure.
func TestAFailingApplierPassBacksOffDoublingToItsCap(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var log pgtest.SyncBuffer
	svc := New(pgtest.ClosedPool(t, b.pool), b.plane, Config{Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}
	var waits []time.Duration
	svc.applierClock = func(_ context.Context, w time.Duration) bool {
		waits = append(waits, w)
		return len(waits) <= len(want)
	}
	if err := svc.RunApplier(context.Background(), ApplierConfig{Interval: 5 * time.Millisecond, MaxIdleBackoff: 40 * time.Millisecond}); err != nil {
		t.Fatalf("RunApplier = %v, want nil", err)
	}
	if got := waits[1:]; !slices.Equal(got, want) {
		t.Errorf("the waits after failed passes = %v, want %v", got, want)
	}
	if n := strings.Count(log.String(), `"msg":"providerjobs: applier: pass failed; backing off"`); n != len(want) {
		t.Errorf("%d failed passes logged, want %d:\n%s", n, len(want), log.String())
	}
}
