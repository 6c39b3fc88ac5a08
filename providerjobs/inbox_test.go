package providerjobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/idempotency"
)

// inboxCounter is an InboxObserver on top of counter.
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
func (b *bundle) versions(ids ...uuid.UUID) (out []int64) {
	for _, id := range ids {
		out = append(out, b.job(id).Version)
	}
	return out
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
	if n := b.count(`SELECT count(*) FROM agent.provider_inbox`); n != 1 {
		t.Errorf("%d arrivals, want 1", n)
	}
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
	e, fresh, err := b.svc.land(context.Background(), d)
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
		if _, fresh, err := b.svc.land(context.Background(), d); err != nil || !fresh {
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
			e, err := b.svc.GetArrival(context.Background(), "acme", d.DeliveryID)
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
	if n := b.count(`SELECT count(*) FROM agent.provider_inbox WHERE status <> 'applied'`); n != 0 {
		t.Errorf("%d arrivals not applied, want 0", n)
	}
	if n := b.count(`SELECT count(*) FROM agent.idempotency_keys WHERE status <> 'completed'`); n != 0 {
		t.Errorf("%d claims left processing, want 0", n)
	}
}

// TestPathIsBoundToTheDelivery is point 4: organizations A and B both
// register the provider job id "shared". A delivery signed for A's job,
// re-posted unchanged to B's job path, is dropped as path_mismatch and
// never applied to B; the arrival keys deliveries across organizations.
func TestPathIsBoundToTheDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	jobA := b.seedJob("shared")
	orgB := uuid.New()
	jobB, _, err := b.svc.Register(context.Background(), orgB, RegisterParams{RunID: b.seedRun(orgB), Provider: "acme", ProviderJobID: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	d := delivery(jobA, "d-a", StatusSucceeded)
	if out, err := b.svc.Receive(context.Background(), d); err != nil || !out.Accepted {
		t.Fatalf("delivery on A's path = %+v, %v; want accepted", out, err)
	}
	replay := d
	replay.JobID = jobB.ID.String()
	out, err := b.svc.Receive(context.Background(), replay)
	if err != nil || out.Reason != DropPathMismatch {
		t.Fatalf("the captured delivery on B's path = %+v, %v; want dropped path_mismatch", out, err)
	}
	got, err := b.svc.Get(context.Background(), orgB, jobB.ID)
	if err != nil || got.Version != 1 || got.Status != StatusPending {
		t.Errorf("B's job = %+v, %v; want it untouched", got, err)
	}
	var reason, pathJobID string
	if err := b.pool.QueryRow(context.Background(),
		`SELECT reason, path_job_id FROM agent.webhook_drops WHERE delivery_id = 'd-a'`).Scan(&reason, &pathJobID); err != nil ||
		reason != "path_mismatch" || pathJobID != jobB.ID.String() {
		t.Errorf("drop audit = %q on %q, %v; want path_mismatch naming B's path", reason, pathJobID, err)
	}
	if c, err := b.svc.ArrivalCopies(context.Background(), b.arrival("d-a").ID); err != nil || c.PathMismatches != 1 || c.Duplicates != 0 {
		t.Errorf("copies = %+v, %v; want one path_mismatch", c, err)
	}
	// A body the id does not answer for is a hash_mismatch whatever the
	// path: the hash is compared first.
	other := delivery(jobB, "d-a", StatusFailed)
	if out, err := b.svc.Receive(context.Background(), other); err != nil || out.Reason != DropHashMismatch {
		t.Errorf("another body under the id on B's path = %+v, %v; want hash_mismatch", out, err)
	}
}

// TestCopiesAreCountedNotMultiplied is point 5: many copies of one
// delivery make one arrival, one audit row per reason and a counter.
func TestCopiesAreCountedNotMultiplied(t *testing.T) {
	t.Parallel()
	obs := &inboxCounter{counter: counter{n: map[string]int{}}}
	b := setup(t, setupOpts{})
	svc := b.withService(Config{Observer: obs})
	job := b.seedJob("j-copies")
	d := delivery(job, "d-copies", StatusRunning)
	unknown := d
	unknown.DeliveryID, unknown.JobID = "d-unknown", uuid.NewString()
	const copies = 300
	for range copies + 1 {
		if _, err := svc.Receive(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Receive(context.Background(), unknown); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.count(`SELECT count(*) FROM agent.provider_inbox`); n != 2 {
		t.Errorf("%d arrivals, want 2", n)
	}
	if n := b.count(`SELECT count(*) FROM agent.webhook_drops`); n != 2 {
		t.Errorf("%d audit rows, want 2: the first duplicate, and the unknown path's unknown_job", n)
	}
	for _, id := range []string{"d-copies", "d-unknown"} {
		c, err := svc.ArrivalCopies(context.Background(), b.arrival(id).ID)
		if err != nil || c.Duplicates != copies || c.LastAt == nil {
			t.Errorf("copies of %s = %+v, %v; want %d duplicates", id, c, err, copies)
		}
	}
	if obs.copies.Load() != 2*copies || obs.get("acme/duplicate") != 2*copies || obs.applied.Load() != 1 {
		t.Errorf("observed %d copies, %d duplicates, %d applied; want %d, %d, 1",
			obs.copies.Load(), obs.get("acme/duplicate"), obs.applied.Load(), 2*copies, 2*copies)
	}
	if got := b.job(job.ID); got.Version != 2 {
		t.Errorf("job version = %d, want 2", got.Version)
	}
}

// TestAckNeverDependsOnTheDropAudit is point 6 of issue 12: when the audit
// cannot be written, every valid delivery is still answered, the failure is
// logged and counted, and the arrival records the reason.
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
	unknown := d
	unknown.DeliveryID, unknown.JobID = "d-unknown", "not-a-job"
	if out, err := svc.Receive(context.Background(), unknown); err != nil || out.Reason != DropUnknownJob {
		t.Errorf("unknown job with the audit failing = %+v, %v; want dropped unknown_job, no error", out, err)
	}
	if e := b.arrival("d-unknown"); e.Status != InboxDropped || e.Reason != DropUnknownJob {
		t.Errorf("arrival = %+v, want it dropped unknown_job: the reason is recorded on the arrival", e)
	}
	if obs.auditFailures.Load() != 2 {
		t.Errorf("audit failures counted = %d, want 2", obs.auditFailures.Load())
	}
	if n := b.count(`SELECT count(*) FROM agent.webhook_drops`); n != 0 {
		t.Errorf("%d audit rows, want 0", n)
	}
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
	if _, fresh, err := b.svc.land(context.Background(), delivery(job, "d-woken", StatusSucceeded)); err != nil || !fresh {
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
