package providerjobs

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/searchd/searchd/internal/pgtest"
	"github.com/searchd/searchd/runs"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

// counter is an Observer counting drops by "provider/reason".
type counter struct {
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

// wantPairRefused registers ours's provider job id under org with run, and
// wants it refused with ErrAlreadyRegistered, nothing of org's written and
// the directory still naming ours once.
func (b *bundle) wantPairRefused(org, run uuid.UUID, ours *Job) {
	b.t.Helper()
	p := RegisterParams{RunID: run, Provider: ours.Provider, ProviderJobID: ours.ProviderJobID}
	if job, created, err := b.svc.Register(context.Background(), org, p); !errors.Is(err, ErrAlreadyRegistered) || job != nil || created {
		b.t.Fatalf("%s's registration of %s's provider job id = %+v, created %v, %v; want ErrAlreadyRegistered", org, ours.OrganizationID, job, created, err)
	}
	if n := b.count(`SELECT count(*) FROM agent.provider_jobs WHERE organization_id = $1`, org); n != 0 {
		b.t.Errorf("%s holds %d jobs after its refused registration, want 0: nothing is written", org, n)
	}
	if n := b.count(`SELECT count(*) FROM agent.provider_job_directory WHERE organization_id = $1 AND job_id = $2`, ours.OrganizationID, ours.ID); n != 1 {
		b.t.Errorf("the directory names %s's job %d times, want once", ours.OrganizationID, n)
	}
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

// TestRegisterIsSafeToRetryAndThePairIsTheWorlds: a registration repeated
// by its organization finds its job; the same pair registered by another
// organization is refused and writes nothing (issue 24.3).
func TestRegisterIsSafeToRetryAndThePairIsTheWorlds(t *testing.T) {
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

	// Another organization registers the same provider job id: refused,
	// and nothing of it is written.
	other := uuid.New()
	b.wantPairRefused(other, b.seedRun(other), first)
	b.wantCount(1, "jobs", `SELECT count(*) FROM agent.provider_jobs`)
	// The pair is another provider's to register: the directory is per
	// provider.
	if _, created, err := b.svc.Register(ctx, other, RegisterParams{RunID: b.seedRun(other), Provider: "other", ProviderJobID: "j-1"}); err != nil || !created {
		t.Errorf("another organization's Register of the pair under another provider = created %v, %v; want created", created, err)
	}
	out, err := b.svc.Receive(ctx, delivery(first, "d-1", StatusSucceeded))
	if err != nil || !out.Accepted || out.JobID != first.ID {
		t.Fatalf("Receive for our job = %+v, %v; want accepted for %s", out, err, first.ID)
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

// TestReceiveResolvesTheJobItsBodyNames: a delivery is about the job its
// signed body names, through the directory; a body naming no job drops as
// unknown_job (recorded without an organization), and a path that is not
// that job's drops as job_mismatch, recorded under the organization and
// the job the body named. Neither claims anything.
func TestReceiveResolvesTheJobItsBodyNames(t *testing.T) {
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
		{"the provider's id in the path", func(d *Delivery) { d.JobID = job.ProviderJobID }, DropJobMismatch, job.ID},
		{"no such job in the path", func(d *Delivery) { d.JobID = uuid.NewString() }, DropJobMismatch, job.ID},
		{"empty path id", func(d *Delivery) { d.JobID = "" }, DropJobMismatch, job.ID},
		{"the body names another job of ours", func(d *Delivery) { d.Update.ProviderJobID = second.ProviderJobID }, DropJobMismatch, second.ID},
		{"the job under another provider", func(d *Delivery) { d.Provider = "other" }, DropUnknownJob, uuid.Nil},
		{"the body names an unregistered job", func(d *Delivery) { d.Update.ProviderJobID = "j-3" }, DropUnknownJob, uuid.Nil},
		{"the body names searchd's id", func(d *Delivery) { d.Update.ProviderJobID = job.ID.String() }, DropUnknownJob, uuid.Nil},
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

// TestRegisterTakesOverAnEntryPastItsRetention: the directory entry of a
// job whose Run is past its retention (the job goes with it) names nothing
// worth keeping: the next registration of the pair, by any organization,
// takes it over, and the pair's callbacks find the new job.
func TestRegisterTakesOverAnEntryPastItsRetention(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	old := b.seedJob("recycled")
	other := uuid.New()
	b.clk.Advance(runs.Retention - time.Second)
	if _, _, err := b.svc.Register(ctx, other, RegisterParams{RunID: b.seedRun(other), Provider: "acme", ProviderJobID: "recycled"}); !errors.Is(err, ErrAlreadyRegistered) {
		t.Fatalf("Register inside the entry's retention = %v, want ErrAlreadyRegistered", err)
	}
	b.clk.Advance(time.Second)
	job, created, err := b.svc.Register(ctx, other, RegisterParams{RunID: b.seedRun(other), Provider: "acme", ProviderJobID: "recycled"})
	if err != nil || !created || job.OrganizationID != other {
		t.Fatalf("Register once the entry's retention passed = %+v, %v, %v; want a new job of the other organization", job, created, err)
	}
	var org, jobID uuid.UUID
	if err := b.pool.QueryRow(ctx, `SELECT organization_id, job_id FROM agent.provider_job_directory
		WHERE provider = 'acme' AND provider_job_id = 'recycled'`).Scan(&org, &jobID); err != nil || org != other || jobID != job.ID {
		t.Errorf("the entry names %s's job %s, %v; want %s's %s", org, jobID, err, other, job.ID)
	}
	if jobID == old.ID {
		t.Error("the entry still names the old job")
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
