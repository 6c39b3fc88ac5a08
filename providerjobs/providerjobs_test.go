package providerjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/runs"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

// counter is an Observer counting drops by "provider/reason".
type counter struct {
	NopObserver
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) ObserveDrop(provider, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[provider+"/"+reason]++
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// bundle is what setup hands a test.
type bundle struct {
	t     *testing.T
	pool  *pgxpool.Pool
	clk   *dbclocktest.Stub // the plane, and so the service, run at it
	obs   *counter
	plane *idempotency.Service
	svc   *Service
	org   uuid.UUID
}

// setupOpts tune setup; the zero value is a plain service.
type setupOpts struct {
	// beforeApply is the service's test hook.
	beforeApply func(ctx context.Context, tx pgx.Tx) error
}

func setup(t *testing.T, opts setupOpts) *bundle {
	t.Helper()
	pool := pgtest.NewDB(t)
	clk := dbclocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	obs := &counter{n: map[string]int{}}
	plane := idempotency.NewService(pool, idempotency.Config{Clock: clk.Clock()})
	return &bundle{
		t: t, pool: pool, clk: clk, obs: obs, plane: plane, org: uuid.New(),
		svc: New(pool, plane, Config{Observer: obs, beforeApply: opts.beforeApply}),
	}
}

func (b *bundle) seedRun(org uuid.UUID) uuid.UUID {
	b.t.Helper()
	name := "capability"
	run, _, err := runs.NewStore(b.pool, runs.Config{}).Admit(context.Background(), runs.AdmitParams{
		OrganizationID: org, Kind: runs.KindCapability, StartKey: runs.DirectStartKey(uuid.NewString()),
		RequestHash: "seed", Name: &name,
	})
	if err != nil {
		b.t.Fatalf("seeding a Run: %v", err)
	}
	return run.ID
}

func (b *bundle) seedJob(providerJobID string) *Job {
	b.t.Helper()
	job, created, err := b.svc.Register(context.Background(), b.org,
		RegisterParams{RunID: b.seedRun(b.org), Provider: "acme", ProviderJobID: providerJobID})
	if err != nil || !created {
		b.t.Fatalf("Register = created %v, %v; want created", created, err)
	}
	return job
}

func (b *bundle) count(query string, args ...any) int {
	b.t.Helper()
	return pgtest.Count(b.t, b.pool, query, args...)
}

// wantCount fails the test, saying "<n> <what>, want <want>", unless query
// counts want.
func (b *bundle) wantCount(want int, what, query string, args ...any) {
	b.t.Helper()
	if n := b.count(query, args...); n != want {
		b.t.Errorf("%d %s, want %d", n, what, want)
	}
}

func (b *bundle) arrival(deliveryID string) *InboxEntry {
	b.t.Helper()
	e, err := b.svc.GetArrival(context.Background(), b.org, "acme", deliveryID)
	if err != nil {
		b.t.Fatalf("GetArrival(%s): %v", deliveryID, err)
	}
	return e
}

func (b *bundle) job(id uuid.UUID) *Job {
	b.t.Helper()
	job, err := b.svc.Get(context.Background(), b.org, id)
	if err != nil {
		b.t.Fatalf("Get(%s): %v", id, err)
	}
	return job
}

// delivery returns a valid delivery of status about job: on the path of
// searchd's id, naming the provider's id in the body.
func delivery(job *Job, deliveryID string, status Status) Delivery {
	body := []byte(`{"job_id":"` + job.ProviderJobID + `","status":"` + string(status) + `"}`)
	return Delivery{Provider: job.Provider, JobID: job.ID.String(), DeliveryID: deliveryID, Body: body,
		Update: Update{ProviderJobID: job.ProviderJobID, Status: status}}
}

func TestRegisterThenGet(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	run := b.seedRun(b.org)
	job, created, err := b.svc.Register(context.Background(), b.org, RegisterParams{RunID: run, Provider: "acme.jobs", ProviderJobID: "j-1"})
	if err != nil || !created {
		t.Fatalf("Register = created %v, %v; want created", created, err)
	}
	if job.OrganizationID != b.org || job.RunID != run || job.Status != StatusPending || job.Result != nil ||
		job.Version != 1 || !job.CreatedAt.Equal(b.clk.Now()) || !job.UpdatedAt.Equal(job.CreatedAt) {
		t.Errorf("registered %+v, want a pending job of the Run at the stubbed clock", job)
	}
	if got := b.job(job.ID); got.ID != job.ID || got.ProviderJobID != "j-1" {
		t.Errorf("Get = %+v, want the registered job", got)
	}
	if _, err := b.svc.Get(context.Background(), uuid.New(), job.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get from another organization = %v, want ErrNotFound", err)
	}
}

func TestRegisterRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	run := b.seedRun(b.org)
	other := uuid.New()
	if _, _, err := b.svc.Register(context.Background(), b.org, RegisterParams{RunID: run, Provider: "acme", ProviderJobID: "taken"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		org  uuid.UUID
		p    RegisterParams
		want error
	}{
		{"another organization's Run", b.org, RegisterParams{RunID: b.seedRun(other), Provider: "acme", ProviderJobID: "j"}, ErrRunNotFound},
		{"no such Run", b.org, RegisterParams{RunID: uuid.New(), Provider: "acme", ProviderJobID: "j"}, ErrRunNotFound},
		{"registered already, for another Run", b.org, RegisterParams{RunID: b.seedRun(b.org), Provider: "acme", ProviderJobID: "taken"}, ErrAlreadyRegistered},
		// The Run is checked first.
		{"registered already, for a Run of another organization", b.org, RegisterParams{RunID: b.seedRun(other), Provider: "acme", ProviderJobID: "taken"}, ErrRunNotFound},
		{"registered already, for no Run", b.org, RegisterParams{RunID: uuid.New(), Provider: "acme", ProviderJobID: "taken"}, ErrRunNotFound},
		{"nil organization", uuid.Nil, RegisterParams{RunID: run, Provider: "acme", ProviderJobID: "j"}, ErrInvalid},
		{"nil Run", b.org, RegisterParams{Provider: "acme", ProviderJobID: "j"}, ErrInvalid},
		{"bad provider", b.org, RegisterParams{RunID: run, Provider: "Acme", ProviderJobID: "j"}, ErrInvalid},
		{"empty job id", b.org, RegisterParams{RunID: run, Provider: "acme"}, ErrInvalid},
		{"job id too long", b.org, RegisterParams{RunID: run, Provider: "acme", ProviderJobID: strings.Repeat("é", 256)}, ErrInvalid},
		{"job id with a newline", b.org, RegisterParams{RunID: run, Provider: "acme", ProviderJobID: "a\nb"}, ErrInvalid},
		{"job id not UTF-8", b.org, RegisterParams{RunID: run, Provider: "acme", ProviderJobID: "a\xff"}, ErrInvalid},
	}
	for _, tt := range tests {
		if job, _, err := b.svc.Register(context.Background(), tt.org, tt.p); !errors.Is(err, tt.want) || job != nil {
			t.Errorf("%s: Register = %v, %v; want %v", tt.name, job, err, tt.want)
		}
	}
	// 255 characters of two bytes each is a valid id.
	if _, _, err := b.svc.Register(context.Background(), b.org, RegisterParams{RunID: run, Provider: "acme", ProviderJobID: strings.Repeat("é", 255)}); err != nil {
		t.Errorf("Register of a 255-character id = %v, want it registered", err)
	}
	b.wantCount(2, "jobs", `SELECT count(*) FROM agent.provider_jobs`)
}

// TestRegisterIsSafeToRetryAndThePairIsTheOrganizations: a registration
// repeated by its organization finds its job; the same pair registered by
// another organization creates that organization's own job, as if nobody
// held the pair (issue 36.6: no squatting, no existence oracle).
func TestRegisterIsSafeToRetryAndThePairIsTheOrganizations(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	run := b.seedRun(b.org)
	p := RegisterParams{RunID: run, Provider: "acme", ProviderJobID: "j-1"}
	first, created, err := b.svc.Register(ctx, b.org, p)
	if err != nil || !created {
		t.Fatalf("Register = created %v, %v; want created", created, err)
	}
	b.clk.Advance(time.Minute)
	again, created, err := b.svc.Register(ctx, b.org, p)
	if err != nil || created || again.ID != first.ID || !again.CreatedAt.Equal(first.CreatedAt) || again.Version != 1 {
		t.Errorf("Register again = %+v, created %v, %v; want the first job, not created", again, created, err)
	}

	// Another organization registers the same provider job id: its own
	// job, created, and a retry of it finds that one.
	other := uuid.New()
	op := RegisterParams{RunID: b.seedRun(other), Provider: "acme", ProviderJobID: "j-1"}
	theirs, created, err := b.svc.Register(ctx, other, op)
	if err != nil || !created || theirs.OrganizationID != other || theirs.ID == first.ID || theirs.Version != 1 {
		t.Fatalf("another organization's Register of the pair = %+v, created %v, %v; want its own job, created", theirs, created, err)
	}
	if again, created, err := b.svc.Register(ctx, other, op); err != nil || created || again.ID != theirs.ID {
		t.Errorf("its retry = %+v, created %v, %v; want its job, not created", again, created, err)
	}
	// For another Run of its own organization the pair is a conflict.
	if _, _, err := b.svc.Register(ctx, other, RegisterParams{RunID: b.seedRun(other), Provider: "acme", ProviderJobID: "j-1"}); !errors.Is(err, ErrAlreadyRegistered) {
		t.Errorf("another Run of the other organization = %v, want ErrAlreadyRegistered", err)
	}
	b.wantCount(2, "jobs", `SELECT count(*) FROM agent.provider_jobs`)
	for _, j := range []*Job{first, theirs} {
		if n := b.count(`SELECT count(*) FROM agent.provider_job_directory
			WHERE job_id = $1 AND organization_id = $2 AND provider = 'acme' AND provider_job_id = 'j-1'`, j.ID, j.OrganizationID); n != 1 {
			t.Errorf("the directory names %s's job %d times, want once", j.OrganizationID, n)
		}
	}
	out, err := b.svc.Receive(ctx, delivery(first, "d-1", StatusSucceeded))
	if err != nil || !out.Accepted || out.JobID != first.ID {
		t.Fatalf("Receive for our job = %+v, %v; want accepted for %s", out, err, first.ID)
	}
	if got, err := b.svc.Get(ctx, other, theirs.ID); err != nil || got.Status != StatusPending || got.Version != 1 {
		t.Errorf("their job after our delivery = %+v, %v; want it untouched", got, err)
	}
}

// TestRegisterConcurrentRetriesCreateOneJob races identical registrations,
// as a client retrying while its first attempt is still in flight would:
// one creates the job, every other finds it.
func TestRegisterConcurrentRetriesCreateOneJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	p := RegisterParams{RunID: b.seedRun(b.org), Provider: "acme", ProviderJobID: "j-race"}
	const n = 20
	jobs := make([]*Job, n)
	created := make([]bool, n)
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Go(func() {
			start.Wait()
			jobs[i], created[i], errs[i] = b.svc.Register(context.Background(), b.org, p)
		})
	}
	start.Done()
	done.Wait()
	creators := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Register %d = %v", i, errs[i])
		}
		if created[i] {
			creators++
		}
		if jobs[i].ID != jobs[0].ID {
			t.Errorf("Register %d = job %s, want %s: one job for all", i, jobs[i].ID, jobs[0].ID)
		}
	}
	if creators != 1 {
		t.Errorf("%d registrations created the job, want 1", creators)
	}
	b.wantCount(1, "jobs", `SELECT count(*) FROM agent.provider_jobs`)
}

// TestReceiveResolvesTheJobItsPathNames: a delivery is about the job its
// callback path names, through the directory, and its signed body must
// name that job's provider job id. A path naming no job of the provider
// drops as unknown_job (recorded without an organization); a body naming
// another provider job id drops as job_mismatch, recorded under the
// organization and the job of the path. Neither claims anything.
func TestReceiveResolvesTheJobItsPathNames(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	job := b.seedJob("j-1")
	second := b.seedJob("j-2")
	tests := []struct {
		name   string
		modify func(d *Delivery)
		want   DropReason
		job    uuid.UUID // the job the drop names; nil for none
	}{
		{"the provider's id in the path", func(d *Delivery) { d.JobID = job.ProviderJobID }, DropUnknownJob, uuid.Nil},
		{"no such job in the path", func(d *Delivery) { d.JobID = uuid.NewString() }, DropUnknownJob, uuid.Nil},
		{"empty path id", func(d *Delivery) { d.JobID = "" }, DropUnknownJob, uuid.Nil},
		{"the path's id in upper case", func(d *Delivery) { d.JobID = strings.ToUpper(job.ID.String()) }, DropUnknownJob, uuid.Nil},
		{"the job under another provider", func(d *Delivery) { d.Provider = "other" }, DropUnknownJob, uuid.Nil},
		{"the body names another job of ours", func(d *Delivery) { d.Update.ProviderJobID = second.ProviderJobID }, DropJobMismatch, job.ID},
		{"the path names another job of ours", func(d *Delivery) { d.JobID = second.ID.String() }, DropJobMismatch, second.ID},
		{"the body names an unregistered job", func(d *Delivery) { d.Update.ProviderJobID = "j-3" }, DropJobMismatch, job.ID},
		{"the body names searchd's id", func(d *Delivery) { d.Update.ProviderJobID = job.ID.String() }, DropJobMismatch, job.ID},
	}
	for i, tt := range tests {
		d := delivery(job, "d-"+strconv.Itoa(i), StatusRunning)
		tt.modify(&d)
		out, err := b.svc.Receive(ctx, d)
		if err != nil || out.Accepted || out.Reason != tt.want {
			t.Errorf("%s: Receive = %+v, %v; want dropped %s", tt.name, out, err, tt.want)
			continue
		}
		var pathJobID string
		var org, jobID *uuid.UUID
		if err := b.pool.QueryRow(ctx, `SELECT path_job_id, organization_id, job_id FROM agent.webhook_drops WHERE delivery_id = $1`,
			d.DeliveryID).Scan(&pathJobID, &org, &jobID); err != nil {
			t.Fatalf("%s: reading the drop: %v", tt.name, err)
		}
		named := tt.job != uuid.Nil
		if pathJobID != d.JobID || (org != nil) != named || (jobID != nil) != named ||
			(named && (*org != b.org || *jobID != tt.job)) {
			t.Errorf("%s: drop names path job %q, organization %v and job %v; want %q, and the organization and job %s",
				tt.name, pathJobID, org, jobID, d.JobID, tt.job)
		}
	}
	b.wantCount(0, "claims for deliveries that were not about their path's job", `SELECT count(*) FROM agent.idempotency_keys`)
	b.wantCount(0, "arrivals landed for them", `SELECT count(*) FROM agent.provider_inbox`)
	if got := b.job(job.ID); got.Status != StatusPending || got.Version != 1 {
		t.Errorf("job = %+v, want it untouched", got)
	}
	// The control: the same delivery, on the right path, is applied.
	if out, err := b.svc.Receive(ctx, delivery(job, "d-right", StatusRunning)); err != nil || !out.Accepted || !out.Applied {
		t.Errorf("Receive on searchd's id = %+v, %v; want accepted and applied", out, err)
	}
}

// TestAnUpdateToTheStateAJobHasChangesNothing: a callback sets the job's
// status and result, so another delivery (a new delivery id, not a
// redelivery) that reports the state the job already has changes nothing:
// neither its version nor its updated_at.
func TestAnUpdateToTheStateAJobHasChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	job := b.seedJob("j-1")
	progress := func(id string, result string) Delivery {
		d := delivery(job, id, StatusRunning)
		d.Update.Result = json.RawMessage(result)
		d.Body = []byte(`{"job_id":"` + job.ProviderJobID + `","status":"running","result":` + result + `,"n":"` + id + `"}`)
		return d
	}
	receive := func(d Delivery) *Job {
		t.Helper()
		if out, err := b.svc.Receive(ctx, d); err != nil || !out.Accepted {
			t.Fatalf("Receive(%s) = %+v, %v; want accepted", d.DeliveryID, out, err)
		}
		return b.job(job.ID)
	}

	first := receive(progress("d-1", `{"progress": 0.5, "stage": "crawl"}`))
	if first.Version != 2 || first.Status != StatusRunning {
		t.Fatalf("after the first running = %+v, want version 2", first)
	}
	b.clk.Advance(time.Minute)
	// The same state, its result written in another key order.
	if got := receive(progress("d-2", `{"stage":"crawl","progress":0.5}`)); got.Version != 2 || !got.UpdatedAt.Equal(first.UpdatedAt) {
		t.Fatalf("after the same running again = version %d updated_at %v, want 2 and %v unchanged", got.Version, got.UpdatedAt, first.UpdatedAt)
	}
	b.clk.Advance(time.Minute)
	moved := receive(progress("d-3", `{"progress":0.75,"stage":"crawl"}`))
	if moved.Version != 3 || !moved.UpdatedAt.After(first.UpdatedAt) || string(moved.Result) != `{"stage": "crawl", "progress": 0.75}` {
		t.Fatalf("after new progress = %+v (result %s), want version 3 and a later updated_at", moved, moved.Result)
	}
	done := receive(delivery(job, "d-4", StatusSucceeded))
	if done.Version != 4 || done.Status != StatusSucceeded || done.Result != nil {
		t.Fatalf("after succeeded = %+v, want version 4, succeeded, no result", done)
	}
}

func TestSchemaTiesAJobToItsOrganizationsRun(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	theirs := b.seedRun(uuid.New())
	_, err := b.pool.Exec(context.Background(), `
		INSERT INTO agent.provider_jobs (id, organization_id, run_id, provider, provider_job_id, created_at, updated_at)
		VALUES ($1, $2, $3, 'acme', 'sneaky', now(), now())`, uuid.New(), b.org, theirs)
	// Citus reports a worker's refusal without its constraint field, in
	// a message naming the shard's copy of it (provider_jobs_run_fkey_102008).
	if dberr.Code(err) != "23503" || !strings.Contains(err.Error(), "provider_jobs_run_fkey") {
		t.Errorf("a job of our organization on their Run = %v, want the tenant-checked foreign key to refuse it", err)
	}

	// A Run deleted by retention takes its jobs with it, and a callback
	// for one of them then names a job nobody holds.
	job := b.seedJob("doomed")
	if _, err := b.pool.Exec(context.Background(), `DELETE FROM agent.runs WHERE id = $1`, job.RunID); err != nil {
		t.Fatalf("deleting the Run: %v", err)
	}
	b.wantCount(0, "jobs after their Run was deleted", `SELECT count(*) FROM agent.provider_jobs`)
	out, err := b.svc.Receive(context.Background(), delivery(job, "d-1", StatusRunning))
	if err != nil || out.Reason != DropUnknownJob {
		t.Errorf("Receive for the deleted job = %+v, %v; want dropped unknown_job", out, err)
	}
}

func TestReceiveQueuesTheArrivalWhenTheApplyFails(t *testing.T) {
	t.Parallel()
	var failed bool
	b := setup(t, setupOpts{beforeApply: func(ctx context.Context, tx pgx.Tx) error {
		if failed {
			return nil
		}
		failed = true
		// The database goes away under the transaction: its connection
		// is terminated, as a failover or a restart would.
		_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
		return err
	}})
	job := b.seedJob("j-1")
	d := delivery(job, "d-1", StatusSucceeded)

	// The arrival was committed before the apply failed: the answer is an
	// acknowledgement, the delivery is queued.
	out, err := b.svc.Receive(context.Background(), d)
	if err != nil || !out.Queued || out.Accepted || out.Reason != "" {
		t.Fatalf("Receive with the connection terminated = %+v, %v; want queued", out, err)
	}
	if n := b.count(`SELECT count(*) FROM agent.idempotency_keys`); n != 0 {
		t.Errorf("%d claims after a failed apply, want 0: the claim is released so the applier runs it", n)
	}
	if got := b.job(job.ID); got.Status != StatusPending || got.Version != 1 {
		t.Errorf("job = %+v after a failed apply, want it untouched", got)
	}
	if n := b.count(`SELECT count(*) FROM agent.webhook_drops`); n != 0 {
		t.Errorf("%d drops for a failure, want 0: a failure is not a drop", n)
	}
	e := b.arrival("d-1")
	if e.Status != InboxPending || e.Attempts != 1 || !strings.Contains(e.LastError, "57P01") {
		t.Errorf("arrival = %+v, want pending after one attempt, with its error", e)
	}

	// The provider redelivers: a copy of a durable arrival, acknowledged.
	if out, err := b.svc.Receive(context.Background(), d); err != nil || out.Reason != DropDuplicate {
		t.Fatalf("redelivery = %+v, %v; want dropped duplicate", out, err)
	}
	// The applier takes it after its backoff, and applies it once.
	if rep, err := b.svc.ApplyPending(context.Background(), 10); err != nil || rep.Taken != 0 {
		t.Fatalf("ApplyPending inside the backoff = %+v, %v; want nothing taken", rep, err)
	}
	b.clk.Advance(2 * time.Second)
	if rep, err := b.svc.ApplyPending(context.Background(), 10); err != nil || rep != (PassReport{Taken: 1, Applied: 1}) {
		t.Fatalf("ApplyPending after the backoff = %+v, %v; want one applied", rep, err)
	}
	if got := b.job(job.ID); got.Status != StatusSucceeded || got.Version != 2 {
		t.Errorf("job = %+v, want succeeded, applied once", got)
	}
	if e := b.arrival("d-1"); e.Status != InboxApplied || e.AppliedBy != ByApplier || e.LastError != "" {
		t.Errorf("arrival = %+v, want applied by the applier", e)
	}
}

func TestReceiveDropsADuplicateWhenItsFenceIsLost(t *testing.T) {
	t.Parallel()
	var (
		b        *bundle
		d        Delivery
		takeover idempotency.Outcome
	)
	b = setup(t, setupOpts{beforeApply: func(ctx context.Context, tx pgx.Tx) error {
		// This worker stalls past its lease, and a redelivery reclaims the
		// delivery meanwhile.
		b.clk.Advance(idempotency.WebhookLease + time.Second)
		var err error
		takeover, err = b.plane.Claim(ctx, b.org, Scope(d.Provider), d.DeliveryID, RequestHash(d.Body), idempotency.WebhookLease)
		return err
	}})
	job := b.seedJob("j-fence")
	d = delivery(job, "d-1", StatusRunning)
	out, err := b.svc.Receive(context.Background(), d)
	if err != nil || out.Reason != DropDuplicate || out.Accepted {
		t.Fatalf("Receive = %+v, %v; want dropped duplicate", out, err)
	}
	if takeover.Kind != idempotency.KindClaimed || !takeover.Claim.Reclaimed {
		t.Fatalf("the takeover = %+v, want a reclaim", takeover)
	}
	if got := b.job(job.ID); got.Status != StatusPending || got.Version != 1 {
		t.Errorf("job = %+v, want the stalled worker's update rolled back", got)
	}
	var status string
	if err := b.pool.QueryRow(context.Background(), `SELECT status FROM agent.idempotency_keys`).Scan(&status); err != nil || status != "processing" {
		t.Errorf("claim = %q, %v; want it processing, held by the worker that reclaimed it", status, err)
	}
	if n := b.count(`SELECT count(*) FROM agent.webhook_drops WHERE reason = 'duplicate' AND organization_id = $1`, b.org); n != 1 || b.obs.get("acme/duplicate") != 1 {
		t.Errorf("%d duplicate drops recorded, %d observed; want 1 and 1", n, b.obs.get("acme/duplicate"))
	}
}

func TestReceiveDropsUnknownJobWhenTheJobVanishesBeforeTheApply(t *testing.T) {
	t.Parallel()
	var b *bundle
	var jobID uuid.UUID
	b = setup(t, setupOpts{beforeApply: func(ctx context.Context, tx pgx.Tx) error {
		// The Run's retention passes between the resolution and the apply.
		_, err := b.pool.Exec(ctx, `DELETE FROM agent.provider_jobs WHERE id = $1`, jobID)
		return err
	}})
	job := b.seedJob("j-vanishing")
	jobID = job.ID
	out, err := b.svc.Receive(context.Background(), delivery(job, "d-1", StatusRunning))
	if err != nil || out.Reason != DropUnknownJob || out.JobID != job.ID {
		t.Fatalf("Receive = %+v, %v; want dropped unknown_job", out, err)
	}
	var response string
	if err := b.pool.QueryRow(context.Background(),
		`SELECT response::text FROM agent.idempotency_keys WHERE status = 'completed'`).Scan(&response); err != nil {
		t.Fatalf("reading the completed claim: %v", err)
	}
	if response != `{"applied": false, "dropped": "unknown_job"}` {
		t.Errorf("claim response = %s, want the drop as the business answer", response)
	}
	if n := b.count(`SELECT count(*) FROM agent.webhook_drops WHERE reason = 'unknown_job'`); n != 1 || b.obs.get("acme/unknown_job") != 1 {
		t.Errorf("%d unknown_job drops, %d observed; want 1 and 1", n, b.obs.get("acme/unknown_job"))
	}
}

func TestReceiveRefusesInvalidDeliveriesBeforeAnySQL(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	job := b.seedJob("j-1")
	good := delivery(job, "d-1", StatusRunning)
	tests := []struct {
		name   string
		modify func(d *Delivery)
	}{
		{"bad provider", func(d *Delivery) { d.Provider = "acme!" }},
		{"no delivery id", func(d *Delivery) { d.DeliveryID = "" }},
		{"delivery id too long", func(d *Delivery) { d.DeliveryID = strings.Repeat("d", 256) }},
		{"delivery id with a control character", func(d *Delivery) { d.DeliveryID = "d\x01" }},
		{"pending reported", func(d *Delivery) { d.Update.Status = StatusPending }},
		{"unknown status", func(d *Delivery) { d.Update.Status = "done" }},
		{"no body job id", func(d *Delivery) { d.Update.ProviderJobID = "" }},
		{"result an array", func(d *Delivery) { d.Update.Result = json.RawMessage(`[1]`) }},
		{"result null", func(d *Delivery) { d.Update.Result = json.RawMessage(`null`) }},
		{"result not JSON", func(d *Delivery) { d.Update.Result = json.RawMessage(`{`) }},
	}
	for _, tt := range tests {
		d := good
		tt.modify(&d)
		if _, err := b.svc.Receive(context.Background(), d); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Receive = %v, want ErrInvalid", tt.name, err)
		}
	}
	b.wantCount(0, "rows written for invalid deliveries", `SELECT (SELECT count(*) FROM agent.idempotency_keys) + (SELECT count(*) FROM agent.webhook_drops)`)
}

func TestValidateProvider(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"acme", true},
		{"acme.jobs", true},
		{"a-b_c.d9", true},
		{strings.Repeat("a", 100), true},
		{"", false},
		{"Acme", false},
		{".acme", false},
		{"acme.", false},
		{"a..b", false},
		{"a b", false},
		{"acme/jobs", false},
		{strings.Repeat("a", 101), false},
	} {
		if err := ValidateProvider(tt.name); (err == nil) != tt.ok {
			t.Errorf("ValidateProvider(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestStorable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in, want string
	}{
		{"job-1", "job-1"},
		{"a\x00b", "a\uFFFDb"},
		{"a\xffb", "a\uFFFDb"},
		{strings.Repeat("é", 300), strings.Repeat("é", 255)},
		{"", ""},
	} {
		if got := storable(tt.in, MaxJobIDLen); got != tt.want {
			t.Errorf("storable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestBackoffDoublesFromASecondUpToMaxBackoff: the wait after the attempt
// number attempts failed is 1 s, 2 s, 4 s, ..., at most MaxBackoff.
func TestBackoffDoublesFromASecondUpToMaxBackoff(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		max      time.Duration
		attempts int
		want     time.Duration
	}{
		{time.Minute, 0, time.Second},
		{time.Minute, 1, time.Second},
		{time.Minute, 2, 2 * time.Second},
		{time.Minute, 3, 4 * time.Second},
		{time.Minute, 6, 32 * time.Second},
		{time.Minute, 7, time.Minute},
		{time.Minute, 1 << 20, time.Minute},
		{500 * time.Millisecond, 1, 500 * time.Millisecond},
		{1000 * time.Hour, 12, 2048 * time.Second},
	} {
		s := &Service{cfg: Config{MaxBackoff: tt.max}}
		if got := s.backoff(tt.attempts); got != tt.want {
			t.Errorf("backoff(%d) with MaxBackoff %s = %s, want %s", tt.attempts, tt.max, got, tt.want)
		}
	}
}

// TestOrganizationsSharingAProviderJobIDEachGetTheirOwnDeliveries is issue
// 36.6 under concurrency: organizations A and B both register provider job
// id "shared" (and each one of its own), and their providers call back at
// once, with the same delivery ids, each on its own job's path. Every
// delivery is applied once, to the job its path names: A's job only ever
// carries A's results, B's only B's, each organization's arrivals and
// claims are its own. Deliveries cross-posted (A's path with a body naming
// B's own job, and the reverse) drop as job_mismatch and change nothing.
func TestOrganizationsSharingAProviderJobIDEachGetTheirOwnDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	orgA, orgB := b.org, uuid.New()
	register := func(org uuid.UUID, providerJobID string) *Job {
		t.Helper()
		job, created, err := b.svc.Register(ctx, org, RegisterParams{RunID: b.seedRun(org), Provider: "acme", ProviderJobID: providerJobID})
		if err != nil || !created {
			t.Fatalf("%s registers %q = created %v, %v; want created", org, providerJobID, created, err)
		}
		return job
	}
	sharedA, sharedB := register(orgA, "shared"), register(orgB, "shared")
	ownA, ownB := register(orgA, "a-own"), register(orgB, "b-own")

	// Cross-posted first: a body naming B's own job on A's shared path,
	// and one naming A's own job on B's shared path.
	for _, tt := range []struct {
		name      string
		body, dst *Job
	}{
		{"B's body on A's path", ownB, sharedA},
		{"A's body on B's path", ownA, sharedB},
		{"B's body on the path of A's own job", ownB, ownA},
	} {
		d := delivery(tt.body, "d-"+tt.name, StatusSucceeded)
		d.JobID = tt.dst.ID.String()
		if out, err := b.svc.Receive(ctx, d); err != nil || out.Reason != DropJobMismatch || out.JobID != tt.dst.ID {
			t.Errorf("%s = %+v, %v; want dropped job_mismatch on the path's job", tt.name, out, err)
		}
	}
	for _, j := range []*Job{sharedA, sharedB, ownA, ownB} {
		if got, err := b.svc.Get(ctx, j.OrganizationID, j.ID); err != nil || got.Status != StatusPending || got.Version != 1 {
			t.Errorf("job %s of %s after the cross-posts = %+v, %v; want it untouched", j.ProviderJobID, j.OrganizationID, got, err)
		}
	}
	b.wantCount(0, "arrivals of cross-posted deliveries", `SELECT count(*) FROM agent.provider_inbox`)

	// Both providers at once, the same delivery ids, each on its own path.
	const n = 12
	var start, done sync.WaitGroup
	start.Add(1)
	errc := make(chan error, 2*n)
	for i := range n {
		for _, j := range []*Job{sharedA, sharedB} {
			done.Go(func() {
				start.Wait()
				d := delivery(j, "d-"+strconv.Itoa(i), StatusRunning)
				result := `{"org":"` + j.OrganizationID.String() + `","n":` + strconv.Itoa(i) + `}`
				d.Update.Result = json.RawMessage(result)
				d.Body = []byte(`{"job_id":"shared","status":"running","result":` + result + `}`)
				out, err := b.svc.Receive(ctx, d)
				if err != nil || !out.Accepted || out.JobID != j.ID {
					errc <- fmt.Errorf("%s's delivery %s = %+v, %v; want accepted for its job %s", j.OrganizationID, d.DeliveryID, out, err, j.ID)
				}
			})
		}
	}
	start.Done()
	done.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	for _, j := range []*Job{sharedA, sharedB} {
		got, err := b.svc.Get(ctx, j.OrganizationID, j.ID)
		if err != nil || got.Status != StatusRunning || got.Version < 2 || !strings.Contains(string(got.Result), j.OrganizationID.String()) {
			t.Errorf("%s's shared job = %+v (result %s), %v; want running with one of its own organization's results", j.OrganizationID, got, got.Result, err)
		}
		// Every arrival and claim of the organization is about its job,
		// carries its own results, and was applied once.
		b.wantCount(n, "applied arrivals of "+j.OrganizationID.String()+" on its job with its results", `
			SELECT count(*) FROM agent.provider_inbox
			WHERE organization_id = $1 AND job_id = $2 AND status = 'applied' AND body_result->>'org' = $1::text`,
			j.OrganizationID, j.ID)
		b.wantCount(n, "completed claims of "+j.OrganizationID.String(), `
			SELECT count(*) FROM agent.idempotency_keys WHERE organization_id = $1 AND status = 'completed'`, j.OrganizationID)
	}
	b.wantCount(3, "drops (the three cross-posts alone)", `SELECT count(*) FROM agent.webhook_drops`)
	b.wantCount(0, "arrivals on no job of their own organization", `
		SELECT count(*) FROM agent.provider_inbox i
		WHERE NOT EXISTS (SELECT 1 FROM agent.provider_jobs j WHERE j.organization_id = i.organization_id AND j.id = i.job_id)`)
}
