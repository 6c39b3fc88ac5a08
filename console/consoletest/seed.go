// Package consoletest seeds a database, through the domain services, with
// the records the console shows, for the console's tests, its benchmark
// and the browser tests' fixture.
package consoletest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/snapshot"
	"github.com/searchd/searchd/sweeper"
)

// World is what [Seed] made.
type World struct {
	// OrgA is the organization with the story; OrgB another one, whose
	// auditor must see none of it.
	OrgA, OrgB uuid.UUID
	// Search is org A's saved search, started twice with a change to its
	// brief and baseline in between: FirstSnapshot (v1) and SecondSnapshot.
	Search                        uuid.UUID
	FirstSnapshot, SecondSnapshot uuid.UUID
	FirstRun, SecondRun           uuid.UUID
	// SecondKey is the Idempotency-Key of the second start.
	SecondKey string
	// AddedItem and RemovedItem are the baseline change between the two.
	AddedItem, RemovedItem string
	// Archived is an archived saved search of org A.
	Archived uuid.UUID
	// Job is a provider job of SecondRun with an applied delivery and a
	// duplicate.
	Job uuid.UUID
	// Stuck is a processing claim of org A whose lease has passed; InFlight
	// one whose lease is live.
	Stuck, InFlight uuid.UUID
	StuckKey        string
	// Uncertain and UncertainRetry are org A's tool calls with an
	// uncertain answer; UncertainKey and UncertainRetryKey are their keys.
	Uncertain, UncertainRetry       uuid.UUID
	UncertainKey, UncertainRetryKey string
	// PendingDelivery is a callback of the job stalled in the inbox: four
	// failed attempts, the next due in 10 minutes, received 12 minutes ago.
	PendingDelivery string
	// SearchB is org B's saved search, named SearchBName.
	SearchB uuid.UUID
	// DirectRun is org A's direct Run, whose dispatch the runtime refused
	// (422); SecondRun's was delivered on its second attempt (the first
	// answered 503) and reported running, then succeeded with ResultRef.
	DirectRun uuid.UUID
	ResultRef string
	// Scheduled is org A's saved search with a schedule (daily at 09:00
	// Europe/Berlin, set by alice three days ago): two mornings started,
	// ScheduledRun the first, and the one between missed.
	Scheduled    uuid.UUID
	ScheduledRun uuid.UUID
}

// Names of the seeded records the tests look for.
const (
	SearchName   = "Berlin PostgreSQL engineers"
	ArchivedName = "Rust roles (retired)"
	SearchBName  = "Globex confidential search"
	// ScheduledName names the saved search with a schedule.
	ScheduledName = "Nightly Go roles"
	Provider      = "acme"
	// UncertainScope is the tool scope of the uncertain calls.
	UncertainScope = "tool.sms.send"
)

// Seed makes the world on pool: two organizations, org A's saved search
// with two snapshots (the baseline gained AddedItem and lost RemovedItem,
// a filter changed), Runs by two actors, an archived saved search, a
// provider job with deliveries, a stuck and a live claim, a recorded
// sweeper run. It returns an error naming what failed.
func Seed(ctx context.Context, pool *pgxpool.Pool) (*World, error) {
	w := &World{OrgA: uuid.New(), OrgB: uuid.New(), AddedItem: "https://jobs.example.com/postings/1003",
		RemovedItem: "https://jobs.example.com/postings/1002"}
	plane := idempotency.NewService(pool, idempotency.Config{})
	store := savedsearch.NewStore(pool)
	starter, err := admission.NewStarter(admission.Deps{Pool: pool, Plane: plane, SavedSearches: store,
		Snapshots: snapshot.NewStore(pool), Runs: runs.NewStore(pool, runs.Config{})}, admission.Config{})
	if err != nil {
		return nil, failed("build the starter", err)
	}
	sd := &seeder{pool: pool, plane: plane, store: store, starter: starter,
		jobs: providerjobs.New(pool, plane, providerjobs.Config{}), w: w}
	for _, step := range []func(context.Context) error{
		sd.story, sd.archived, sd.job, sd.claims, sd.orgB, sd.scheduled, sd.sweep,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	// The 1 ms lease has passed by now; make sure.
	time.Sleep(5 * time.Millisecond)
	return w, nil
}

// seeder holds the services [Seed] uses; each step adds to w.
type seeder struct {
	pool    *pgxpool.Pool
	plane   *idempotency.Service
	store   *savedsearch.Store
	starter *admission.Starter
	jobs    *providerjobs.Service
	w       *World
}

// failed names the step of [Seed] that failed; nil when err is.
func failed(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("consoletest: %s: %w", what, err)
}

// start starts saved search id of org with key, by actor.
func (sd *seeder) start(ctx context.Context, org, id uuid.UUID, key, actor string) (admission.Result, error) {
	return sd.starter.StartSavedSearch(ctx, admission.SavedSearchStart{Org: org, SavedSearchID: id,
		IdempotencyKey: key, Actor: actor})
}

// story is org A's saved search, started, changed and started again (and
// that start retried), a direct Run, and the dispatches of both.
func (sd *seeder) story(ctx context.Context) error {
	w := sd.w
	ss, err := sd.store.Create(ctx, w.OrgA, savedsearch.CreateParams{
		Name: SearchName,
		Brief: savedsearch.Brief{Query: "senior PostgreSQL engineer",
			Filters: map[string]any{"location": "Berlin", "remote": true}},
		Baseline: savedsearch.Baseline{Items: []string{"https://jobs.example.com/postings/1001", w.RemovedItem}},
		Actor:    "alice",
	})
	if err != nil {
		return failed("create the saved search", err)
	}
	w.Search = ss.ID
	first, err := sd.starter.StartSavedSearch(ctx, admission.SavedSearchStart{Org: w.OrgA, SavedSearchID: ss.ID,
		IdempotencyKey: "weekly-2026-11-24", Actor: "alice", Options: admission.StartOptions{MaxResults: 25}})
	if err != nil {
		return failed("first start", err)
	}
	w.FirstSnapshot, w.FirstRun = first.Snapshot.ID, first.Run.ID
	if _, err := sd.store.ReplaceBaseline(ctx, w.OrgA, ss.ID, savedsearch.Baseline{
		Items: []string{"https://jobs.example.com/postings/1001", w.AddedItem}}); err != nil {
		return failed("replace the baseline", err)
	}
	brief := savedsearch.Brief{Query: "senior PostgreSQL engineer",
		Filters: map[string]any{"location": "Berlin", "remote": false, "seniority": "staff"}}
	if _, err := sd.store.Update(ctx, w.OrgA, ss.ID, savedsearch.UpdateParams{Brief: &brief}); err != nil {
		return failed("update the brief", err)
	}
	w.SecondKey = "weekly-2026-12-01"
	second, err := sd.start(ctx, w.OrgA, ss.ID, w.SecondKey, "bob")
	if err != nil {
		return failed("second start", err)
	}
	w.SecondSnapshot, w.SecondRun = second.Snapshot.ID, second.Run.ID
	// A retried start: the same Run, no new snapshot.
	if _, err := sd.start(ctx, w.OrgA, ss.ID, w.SecondKey, "bob"); err != nil {
		return failed("replayed start", err)
	}
	direct, err := sd.starter.StartDirect(ctx, admission.DirectStart{Org: w.OrgA, Kind: "capability", Name: "enrich.company",
		Input: json.RawMessage(`{"domain":"example.com"}`), IdempotencyKey: "enrich-1", Actor: "carol"})
	if err != nil {
		return failed("direct start", err)
	}
	w.DirectRun = direct.Run.ID
	return failed("dispatch the Runs", seedDispatches(ctx, sd.pool, w, second.Run.CreatedAt))
}

// archived is org A's saved search started once and archived.
func (sd *seeder) archived(ctx context.Context) error {
	old, err := sd.store.Create(ctx, sd.w.OrgA, savedsearch.CreateParams{Name: ArchivedName,
		Brief: savedsearch.Brief{Query: "rust backend"}, Actor: "alice"})
	if err != nil {
		return failed("create the archived saved search", err)
	}
	if _, err := sd.start(ctx, sd.w.OrgA, old.ID, "rust-once", "alice"); err != nil {
		return failed("start the archived saved search", err)
	}
	if err := sd.store.Archive(ctx, sd.w.OrgA, old.ID); err != nil {
		return failed("archive", err)
	}
	sd.w.Archived = old.ID
	return nil
}

// job is the provider job of the second Run: its deliveries (a
// duplicate, a late contradiction) and one stalled in the inbox.
func (sd *seeder) job(ctx context.Context) error {
	w := sd.w
	job, _, err := sd.jobs.Register(ctx, w.OrgA, providerjobs.RegisterParams{RunID: w.SecondRun, Provider: Provider, ProviderJobID: "acme-job-5521"})
	if err != nil {
		return failed("register the job", err)
	}
	w.Job = job.ID
	for _, d := range []struct {
		id, body string
		status   providerjobs.Status
		result   json.RawMessage
	}{
		{"msg_2Kx1", `{"job_id":"acme-job-5521","status":"running"}`, providerjobs.StatusRunning, nil},
		{"msg_2Kx1", `{"job_id":"acme-job-5521","status":"running"}`, providerjobs.StatusRunning, nil},
		{"msg_9Qa7", `{"job_id":"acme-job-5521","status":"succeeded","result":{"matches":12}}`, providerjobs.StatusSucceeded, json.RawMessage(`{"matches":12}`)},
		{"msg_9Qa7", `{"job_id":"acme-job-5521","status":"failed"}`, providerjobs.StatusFailed, nil},
	} {
		u := providerjobs.Update{ProviderJobID: "acme-job-5521", Status: d.status, Result: d.result}
		if _, err := sd.jobs.Receive(ctx, providerjobs.Delivery{Provider: Provider, JobID: job.ID.String(),
			DeliveryID: d.id, Body: []byte(d.body), Update: u}); err != nil {
			return failed("deliver "+d.id, err)
		}
	}
	w.PendingDelivery = "msg_stall_77"
	_, err = sd.pool.Exec(ctx, `INSERT INTO agent.provider_inbox (id, provider, delivery_id, path_job_id, job_id,
		organization_id, request_hash, body_job_id, body_status, received_at, lease_expires_at, attempts, last_error)
		VALUES ($1, $2, $3, $4::text, $4::text::uuid, $5, encode(sha256('stall'::bytea), 'hex'), 'acme-job-5521', 'succeeded',
			now() - interval '12 minutes', now() + interval '10 minutes', 4,
			'applying: canceling statement due to lock timeout (SQLSTATE 55P03)')`,
		uuid.New(), Provider, w.PendingDelivery, job.ID.String(), w.OrgA)
	return failed("plant a stalled arrival", err)
}

// claims are org A's processing claims: a stuck one, a live one and two
// tool calls whose answer is uncertain.
func (sd *seeder) claims(ctx context.Context) error {
	w := sd.w
	w.StuckKey = "run-" + w.SecondRun.String()[28:] + "/email.send/1"
	stuck, err := sd.plane.Claim(ctx, w.OrgA, "tool.email.send", w.StuckKey, "hash-stuck", time.Millisecond)
	if err != nil {
		return failed("stuck claim", err)
	}
	w.Stuck = stuck.Claim.ID
	live, err := sd.plane.Claim(ctx, w.OrgA, "webhook."+Provider, "msg_live_1", "hash-live", 10*time.Minute)
	if err != nil {
		return failed("live claim", err)
	}
	w.InFlight = live.Claim.ID

	w.UncertainKey = "run-" + w.SecondRun.String()[28:] + "/sms.send/1"
	w.UncertainRetryKey = "run-" + w.FirstRun.String()[28:] + "/sms.send/1"
	for _, u := range []struct {
		key string
		id  *uuid.UUID
		msg string
	}{
		{w.UncertainKey, &w.Uncertain, "the vendor took the request and timed out before it answered (no acknowledgement after 30 s)"},
		{w.UncertainRetryKey, &w.UncertainRetry, "connection reset after the request was sent"},
	} {
		out, err := sd.plane.Claim(ctx, w.OrgA, UncertainScope, u.key, "hash-"+u.key, time.Minute)
		if err != nil {
			return failed("uncertain claim", err)
		}
		body, _ := json.Marshal(map[string]any{"ok": false, "outcome": "uncertain", "message": u.msg})
		if ok, err := sd.plane.Complete(ctx, out.Claim, idempotency.Completion{Response: body}); !ok || err != nil {
			return failed("uncertain answer", fmt.Errorf("completed %v: %w", ok, err))
		}
		*u.id = out.Claim.ID
	}
	return nil
}

// orgB is org B's saved search, started once.
func (sd *seeder) orgB(ctx context.Context) error {
	ssB, err := sd.store.Create(ctx, sd.w.OrgB, savedsearch.CreateParams{Name: SearchBName,
		Brief: savedsearch.Brief{Query: "globex internal"}, Actor: "eve"})
	if err != nil {
		return failed("org B saved search", err)
	}
	sd.w.SearchB = ssB.ID
	_, err = sd.start(ctx, sd.w.OrgB, ssB.ID, "globex-1", "eve")
	return failed("org B start", err)
}

// sweep records a sweeper run.
func (sd *seeder) sweep(ctx context.Context) error {
	sw, err := sweeper.New(sd.pool, sweeper.Config{Logger: slog.New(slog.DiscardHandler),
		Recorder: sweeper.NewRunLog(sd.pool, sweeper.ViaSweep, nil, nil)})
	if err != nil {
		return failed("sweeper", err)
	}
	_, err = sw.RunOnce(ctx)
	return failed("sweep", err)
}

// seedDispatches plays the dispatcher and a runtime over the Runs admitted
// so far, on a clock from just after at: the first Run delivered and
// reported failed, the second delivered on its second attempt and
// reported running then succeeded, the direct Run refused (422).
func seedDispatches(ctx context.Context, pool *pgxpool.Pool, w *World, at time.Time) error {
	clock := dbclocktest.New(at.Add(time.Second))
	outbox := dispatch.NewStore(pool, clock.Clock())
	store := runs.NewStore(pool, runs.Config{Clock: clock.Clock()})
	w.ResultRef = "s3://results/" + w.SecondRun.String()[28:] + "/matches.json"
	// Each pass leases what is due and answers as the runtime would.
	type answer struct {
		outcome dispatch.Outcome
		code    int
		text    string
	}
	accepted := answer{dispatch.OutcomeDelivered, 202, "202 Accepted"}
	for i, pass := range []map[uuid.UUID]answer{
		{w.FirstRun: accepted, w.SecondRun: {dispatch.OutcomeRetry, 503, "503 Service Unavailable runtime warming up"},
			w.DirectRun: {dispatch.OutcomeFailed, 422, `422 Unprocessable Entity {"error":"unknown capability enrich.company"}`}},
		{w.SecondRun: accepted},
	} {
		if i > 0 {
			clock.Advance(3 * time.Second) // past the retry's 2 s
		}
		leased, err := outbox.LeasePass(ctx, 10, 15*time.Second)
		if err != nil {
			return err
		}
		for _, l := range leased {
			a, ok := pass[l.RunID]
			if !ok {
				continue
			}
			clock.Advance(40 * time.Millisecond) // the runtime's answer takes a moment
			if _, err := outbox.End(ctx, dispatch.End{Leased: dispatch.Leased{OrganizationID: l.OrganizationID, RunID: l.RunID, Attempt: l.Attempt},
				Outcome: a.outcome, StatusCode: a.code, Answer: a.text, RetryIn: 2 * time.Second}); err != nil {
				return err
			}
		}
	}
	msg := "the job board rate-limited every query"
	for _, r := range []struct {
		run  uuid.UUID
		rep  runs.StatusReport
		wait time.Duration
	}{
		{w.SecondRun, runs.StatusReport{Status: runs.StatusRunning, Reporter: "runtime-eu-1"}, time.Second},
		{w.FirstRun, runs.StatusReport{Status: runs.StatusFailed, Reporter: "runtime-eu-1",
			Error: &runs.RunError{Code: "source.rate_limited", Message: &msg}}, time.Second},
		{w.SecondRun, runs.StatusReport{Status: runs.StatusSucceeded, ResultRef: w.ResultRef, Reporter: "runtime-eu-1"}, 5 * time.Second},
	} {
		clock.Advance(r.wait)
		if _, _, err := store.Report(ctx, w.OrgA, r.run, r.rep); err != nil {
			return err
		}
	}
	return nil
}

// scheduled makes w.Scheduled: a daily schedule set three days ago, on a
// stub clock, and drained on two mornings: the first started, the next
// morning missed (the drain came back more than a day late), the third
// started.
func (sd *seeder) scheduled(ctx context.Context) (err error) {
	defer func() { err = failed("the scheduled saved search", err) }()
	pool, w := sd.pool, sd.w
	clock := dbclocktest.New(time.Now().UTC().Truncate(24 * time.Hour).Add(-72 * time.Hour))
	ss, err := sd.store.Create(ctx, w.OrgA, savedsearch.CreateParams{Name: ScheduledName,
		Brief: savedsearch.Brief{Query: "golang backend", Filters: map[string]any{"remote": true}}, Actor: "alice"})
	if err != nil {
		return err
	}
	w.Scheduled = ss.ID
	expr, zone := "0 9 * * *", "Europe/Berlin"
	sc, _, err := schedule.NewStore(pool, clock.Clock()).Set(ctx, w.OrgA, ss.ID,
		schedule.SetParams{Cron: &expr, TimeZone: &zone, Actor: "alice"})
	if err != nil {
		return err
	}
	rs := runs.NewStore(pool, runs.Config{Clock: clock.Clock()})
	starter, err := admission.NewStarter(admission.Deps{Pool: pool, Plane: idempotency.NewService(pool, idempotency.Config{Clock: clock.Clock()}),
		SavedSearches: sd.store, Snapshots: snapshot.NewStore(pool), Runs: rs}, admission.Config{})
	if err != nil {
		return err
	}
	d, err := schedule.NewDrain(schedule.DrainDeps{Pool: pool, Start: starter.StartSavedSearch, Runs: rs},
		schedule.DrainConfig{Clock: clock.Clock()})
	if err != nil {
		return err
	}
	first := *sc.NextDueAt
	for _, at := range []time.Time{first.Add(30 * time.Minute), first.Add(48*time.Hour + 30*time.Minute)} {
		clock.Set(at)
		if _, err := d.Tick(ctx); err != nil {
			return err
		}
	}
	return pool.QueryRow(ctx, `SELECT run_id FROM agent.schedule_occurrences WHERE organization_id = $1 AND saved_search_id = $2
		AND due_at = $3`, w.OrgA, ss.ID, first).Scan(&w.ScheduledRun)
}
