//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/client"
)

// The inbox scenarios: a provider sends signed callbacks for registered
// jobs, with a short timeout, and redelivers every delivery it did not see
// acknowledged to a healthy replica, until it is. Each scenario breaks one
// thing mid-burst. Afterwards every delivery must have taken effect exactly
// once (the job's version is 2: registration, one application), within a
// few leases, and no arrival or claim may be left unfinished.

// providerTimeout is the provider's timeout for one attempt, as in issue
// 11's report.
const providerTimeout = 2 * time.Second

// Advisory locks the cut probes wait for, in triggers on the two inserts a
// callback makes before its apply: the arrival and the claim.
const (
	holdInboxKey = 7332
	holdClaimKey = 7333
)

// holdInsertSQL installs the cut probes: an insert whose delivery id (or
// claim key) holds -cutinbox- (or -cutclaim-) waits, after the row is
// written and before the statement ends, for a lock the harness holds. The
// harness then makes the proxy swallow replies, lets the insert commit, and
// cuts the connection: the commit happened, its reply is lost.
const holdInsertSQL = `
CREATE FUNCTION public.e2e_hold_inbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(7332);
	RETURN NULL;
END;
$$;
CREATE TRIGGER e2e_hold_inbox AFTER INSERT ON agent.provider_inbox
	FOR EACH ROW WHEN (NEW.delivery_id LIKE '%-cutinbox-%')
	EXECUTE FUNCTION public.e2e_hold_inbox();
CREATE FUNCTION public.e2e_hold_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(7333);
	RETURN NULL;
END;
$$;
CREATE TRIGGER e2e_hold_claim AFTER INSERT ON agent.idempotency_keys
	FOR EACH ROW WHEN (NEW.key LIKE '%-cutclaim-%')
	EXECUTE FUNCTION public.e2e_hold_claim();`

// inboxScenario is one fault of a burst of callbacks.
type inboxScenario struct {
	name string
	jobs int
	// probe, when set, marks the last delivery's id with it; the burst
	// leaves that delivery to the fault.
	probe string
	// fault runs beside the burst, which sends every delivery to victim
	// first; it returns once the fault is over.
	fault func(ctx context.Context, r *inboxRun) error
	// holdsFirst makes the burst wait until the fault calls r.armed (or
	// returns): a fault that holds rows the burst must meet takes them
	// before the first delivery is sent, not in a race with it.
	holdsFirst bool
}

func inboxScenarios() []inboxScenario {
	return []inboxScenario{
		{name: "InboxStallAndKillMidBurst", jobs: 80, fault: stallAndKillMidBurst, holdsFirst: true},
		{name: "InboxCutAfterInboxCommit", jobs: 20, probe: "cutinbox", fault: cutAfterInsert("cutinbox", holdInboxKey)},
		{name: "InboxCutAfterClaimInsert", jobs: 20, probe: "cutclaim", fault: cutAfterInsert("cutclaim", holdClaimKey)},
		{name: "InboxPostgresRestartMidBurst", jobs: 60, fault: restartPostgresMidBurst},
	}
}

// inboxJob is a registered job and the one delivery the provider sends
// about it.
type inboxJob struct {
	id, providerJobID string
	deliveryID        string
	body              []byte
}

// sent is one attempt of the provider.
type sent struct {
	delivery string
	replica  string
	at       time.Time
	took     time.Duration
	status   int    // 0: no answer (timeout, refused)
	answer   string // the callback answer's status and reason, or the problem code
}

// inboxRun is one inbox scenario in progress.
type inboxRun struct {
	t      *testing.T
	h      *harness
	name   string
	org    uuid.UUID
	jobs   []inboxJob
	victim *replica
	wh     *standardwebhooks.Webhook
	hc     *http.Client
	// sentCount counts first attempts sent, so a fault can strike
	// mid-burst.
	sentCount atomic.Int64
	// ready, when set, holds the burst until it is closed (armed).
	ready     chan struct{}
	readyOnce sync.Once
	mu        sync.Mutex
	attempts  []sent
	acked     map[string]bool
	notes     []string
	// stalledFrom is when the victim was stopped; zero when it was not.
	stalledFrom time.Time
	// downs are the windows in which a 503 is excused.
	downs []window
	// inner are deliveries the fault itself sent; the burst skips them.
	inner map[string]bool
}

func (r *inboxRun) note(format string, args ...any) {
	r.mu.Lock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// setupInboxRun makes the scenario's organization, jobs and deliveries.
func setupInboxRun(ctx context.Context, t *testing.T, h *harness, sc inboxScenario) (*inboxRun, error) {
	wh, err := standardwebhooks.NewWebhookRaw([]byte(providerSecret))
	if err != nil {
		return nil, err
	}
	r := &inboxRun{t: t, h: h, name: sc.name, org: uuid.New(), wh: wh, victim: h.replicas[0],
		hc: &http.Client{Timeout: providerTimeout}, acked: map[string]bool{}, inner: map[string]bool{}}
	token, err := auth.SignToken([]byte(jwtSecret), r.org, "e2e-"+sc.name, time.Now(), 24*time.Hour)
	if err != nil {
		return nil, err
	}
	c, err := newClient("setup", token, h.replicas, 1, client.RetryPolicy{}, &recorder{})
	if err != nil {
		return nil, err
	}
	for i := range sc.jobs {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		run, err := c.StartRun(cctx, client.DirectStart{Kind: "capability", Name: fmt.Sprintf("%s run %d", sc.name, i)})
		if err == nil {
			var reg *client.RegisterProviderJobResult
			pj := fmt.Sprintf("%s-pj-%03d", sc.name, i)
			reg, err = c.RegisterProviderJob(cctx, client.RegisterProviderJobParams{RunID: run.Run.ID, Provider: "acme", ProviderJobID: pj})
			if err == nil {
				body, _ := json.Marshal(map[string]any{"job_id": pj, "status": "succeeded", "result": map[string]any{"n": i}})
				r.jobs = append(r.jobs, inboxJob{id: reg.Job.ID, providerJobID: pj,
					deliveryID: fmt.Sprintf("%s-d-%03d", sc.name, i), body: body})
			}
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("registering job %d: %w", i, err)
		}
	}
	if sc.probe != "" {
		last := &r.jobs[len(r.jobs)-1]
		last.deliveryID = fmt.Sprintf("%s-%s-1", sc.name, sc.probe)
		r.inner[last.deliveryID] = true
	}
	return r, nil
}

// send makes one attempt of a delivery to replica rep, signed afresh, with
// the provider's timeout, and records it.
func (r *inboxRun) send(ctx context.Context, rep *replica, j inboxJob) sent {
	return r.sendWith(ctx, r.hc, rep, j)
}

// sendWith is send with the HTTP client hc.
func (r *inboxRun) sendWith(ctx context.Context, hc *http.Client, rep *replica, j inboxJob) sent {
	ts := time.Now()
	sig, err := r.wh.Sign(j.deliveryID, ts, j.body)
	s := sent{delivery: j.deliveryID, replica: rep.name, at: ts}
	if err != nil {
		s.answer = err.Error()
		return s
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rep.URL()+"/v1/callbacks/acme/jobs/"+j.id, bytes.NewReader(j.body))
	if err != nil {
		s.answer = err.Error()
		return s
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.HeaderDeliveryID, j.deliveryID)
	req.Header.Set(api.HeaderTimestamp, fmt.Sprint(ts.Unix()))
	req.Header.Set(api.HeaderSignature, sig)
	res, err := hc.Do(req)
	s.took = time.Since(ts)
	if err != nil {
		s.answer = "no answer"
	} else {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		s.status = res.StatusCode
		var a struct{ Status, Reason, Code string }
		_ = json.Unmarshal(b, &a)
		s.answer = strings.TrimSpace(a.Status + " " + a.Reason + a.Code)
	}
	r.mu.Lock()
	r.attempts = append(r.attempts, s)
	if s.status == http.StatusOK {
		r.acked[j.deliveryID] = true
	}
	r.mu.Unlock()
	return s
}

// burst sends every delivery once to the victim, from 16 workers at once,
// as a provider reporting a batch of jobs does.
// armed lets a burst held by a holdsFirst fault go; it may be called more
// than once.
func (r *inboxRun) armed() {
	if r.ready != nil {
		r.readyOnce.Do(func() { close(r.ready) })
	}
}

func (r *inboxRun) burst(ctx context.Context) {
	if r.ready != nil {
		<-r.ready
	}
	work := make(chan inboxJob)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for j := range work {
				r.sentCount.Add(1)
				r.send(ctx, r.victim, j)
			}
		})
	}
	for _, j := range r.jobs {
		r.mu.Lock()
		skip := r.inner[j.deliveryID]
		r.mu.Unlock()
		if !skip {
			work <- j
		}
	}
	close(work)
	wg.Wait()
}

// redeliver sends every delivery not acknowledged yet to the healthy
// replicas in turn, until each is acknowledged or the deadline passes.
func (r *inboxRun) redeliver(ctx context.Context, deadline time.Time) {
	healthy := r.h.replicas[1:]
	var wg sync.WaitGroup
	for i, j := range r.jobs {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
				r.mu.Lock()
				done := r.acked[j.deliveryID]
				r.mu.Unlock()
				if done {
					return
				}
				if s := r.send(ctx, healthy[(i+n)%len(healthy)], j); s.status == http.StatusOK {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
	wg.Wait()
}

// waitForSessions waits until a session of replica rep is blocked by the
// harness's session pid alone, and reports whether one was.
func (r *inboxRun) waitForSessions(ctx context.Context, rep *replica, pid uint32, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var n int
		if err := r.h.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND pg_blocking_pids(pid) = ARRAY[$2::int]`, rep.name, int(pid)).Scan(&n); err == nil && n > 0 {
			return true
		}
	}
	return false
}

// stallAndKillMidBurst is the report of issue 11: the victim stops
// (SIGSTOP) mid-burst while it is inside the apply transactions of some
// deliveries (the harness holds their job rows, then lets them go once the
// victim is stopped, so the victim's sessions sit idle in their
// transactions holding the job rows' and claims' locks), and is killed
// (kill -9) later. The provider redelivers what it did not see
// acknowledged to the healthy replicas. Those redeliveries are answered at
// once (a copy of a stored arrival never waits for the stalled apply), and
// the appliers apply every arrival once the victim's leases pass and
// PostgreSQL has ended its sessions (idle_in_transaction_session_timeout).
func stallAndKillMidBurst(ctx context.Context, r *inboxRun) error {
	held := r.jobs[24:28]
	conn, err := pgx.Connect(ctx, r.h.pg.URL(dbName)+"&application_name=e2e-wedge")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	for _, j := range held {
		if _, err := conn.Exec(ctx, "SELECT 1 FROM agent.provider_jobs WHERE id = $1 FOR UPDATE", j.id); err != nil {
			return err
		}
	}
	r.armed() // the held rows are taken: the burst may meet them now
	if !r.waitForSessions(ctx, r.victim, conn.PgConn().PID(), 20*time.Second) {
		return fmt.Errorf("%s never reached the apply of a held job", r.victim.name)
	}
	// Let the held applies reach their blocked UPDATEs, a few of them.
	time.Sleep(200 * time.Millisecond)
	if err := r.victim.Stop(); err != nil {
		return err
	}
	stopped := time.Now()
	r.mu.Lock()
	r.stalledFrom = stopped
	r.mu.Unlock()
	// The victim's backends take the job rows and wait, idle in their
	// transactions, for a client that is stopped.
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		return err
	}
	// Until the first of the victim's pending arrivals passes its lease,
	// no applier may take one over, so a healthy replica's session that
	// waits for a lock of the victim's then is a handler's: a copy that
	// waits for the stalled apply, which it must never do. Sampled, so the
	// check is of what waited, not of how fast a busy machine answers.
	var handlersOnly time.Time
	if err := r.h.db.QueryRow(ctx, `SELECT coalesce(min(lease_expires_at), now()) FROM agent.provider_inbox
		WHERE organization_id = $1 AND status = 'pending'`, r.org).Scan(&handlersOnly); err != nil {
		return err
	}
	sampled := make(chan []string, 1)
	go func() { sampled <- r.sampleWaitsOn(ctx, r.victim, handlersOnly) }()
	var idle int
	_ = r.h.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle in transaction'`,
		r.victim.name).Scan(&idle)
	// The provider times out on the victim and redelivers meanwhile.
	time.Sleep(r.h.cfg.lease + 2*time.Second)
	var idleAfter int
	_ = r.h.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle in transaction'`,
		r.victim.name).Scan(&idleAfter)
	waits := <-sampled
	r.victim.Kill()
	r.note("SIGSTOP %s mid-burst with %d sessions idle in their apply transactions (%d left after %s: ended by the %s bound), then kill -9; "+
		"sessions of the healthy replicas sampled for waits on it for %s, until its first arrival's lease passed: %d waited",
		r.victim.name, idle, idleAfter, time.Since(stopped).Round(100*time.Millisecond), idleBound,
		max(0, handlersOnly.Sub(stopped)).Round(100*time.Millisecond), len(waits))
	for _, w := range waits {
		r.t.Errorf("a session of a healthy replica waited for a lock the stopped %s holds (a redelivery must be answered "+
			"without waiting for the stalled apply): %s", r.victim.name, w)
	}
	if idle == 0 {
		r.t.Errorf("no session of %s was idle in its apply transaction when it was stopped: the probe missed", r.victim.name)
	}
	if idleAfter != 0 {
		r.t.Errorf("%d sessions of the stopped %s still idle in their transactions %s later: the idle bound (%s) did not end them",
			idleAfter, r.victim.name, time.Since(stopped).Round(100*time.Millisecond), idleBound)
	}
	return nil
}

// sampleWaitsOn samples, every 20 ms until until (by the database clock),
// the sessions of the replicas other than victim that wait for a lock a
// session of victim holds, and returns what each was running.
func (r *inboxRun) sampleWaitsOn(ctx context.Context, victim *replica, until time.Time) []string {
	seen := map[string]bool{}
	var out []string
	for {
		rows, err := r.h.db.Query(ctx, `SELECT a.application_name || ' pid ' || a.pid || ': ' || left(regexp_replace(a.query, '\s+', ' ', 'g'), 160),
				now() < $2
			FROM pg_stat_activity a
			WHERE a.application_name LIKE 'searchd-%' AND a.application_name <> $1
				AND EXISTS (SELECT 1 FROM pg_stat_activity v WHERE v.application_name = $1 AND v.pid = ANY (pg_blocking_pids(a.pid)))
			UNION ALL SELECT NULL, now() < $2`, victim.name, until)
		if err != nil {
			return append(out, fmt.Sprintf("sampling the lock waits: %v", err))
		}
		more := false
		for rows.Next() {
			var w *string
			var before bool
			if err := rows.Scan(&w, &before); err != nil {
				break
			}
			more = before
			if w != nil && before && !seen[*w] {
				seen[*w] = true
				out = append(out, *w)
			}
		}
		rows.Close()
		if !more || ctx.Err() != nil {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cutAfterInsert sends one probe delivery to the victim and cuts the
// database connection after the insert named by marker (the arrival, or
// the claim) has committed and before its reply arrives. After the arrival
// insert: the victim cannot tell the delivery was stored, answers 503, and
// the redelivery is a copy; the applier applies it. After the claim insert:
// the plane releases the claim it may have written (issue 11.3), so the
// apply proceeds without waiting out a lease.
func cutAfterInsert(marker string, lockKey int) func(ctx context.Context, r *inboxRun) error {
	return func(ctx context.Context, r *inboxRun) error {
		probe := r.jobs[len(r.jobs)-1]
		conn, err := pgx.Connect(ctx, r.h.pg.URL(dbName)+"&application_name=e2e-wedge")
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
			return err
		}
		// The probe waits for the victim's answer however long a busy
		// machine makes it: what is checked is the claim once the victim
		// has answered, not how soon it answers.
		answered := make(chan sent, 1)
		patient := &http.Client{Timeout: time.Minute}
		go func() { answered <- r.sendWith(context.WithoutCancel(ctx), patient, r.victim, probe) }()
		if !r.waitForSessions(ctx, r.victim, conn.PgConn().PID(), 20*time.Second) {
			return fmt.Errorf("%s never reached the %s insert", r.victim.name, marker)
		}
		r.h.proxy.Swallow()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey); err != nil {
			return err
		}
		// The insert commits; its reply is swallowed.
		table, column := "agent.provider_inbox", "delivery_id"
		if marker == "cutclaim" {
			table, column = "agent.idempotency_keys", "key"
		}
		committed := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !committed; time.Sleep(10 * time.Millisecond) {
			_ = r.h.db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+table+" WHERE "+column+" = $1)", probe.deliveryID).Scan(&committed)
		}
		cut := r.h.proxy.Cut()
		cutAt := time.Now()
		r.mu.Lock()
		r.downs = append(r.downs, window{cutAt, cutAt.Add(downMargin)})
		r.mu.Unlock()
		if !committed {
			return fmt.Errorf("the %s insert of %s never committed", marker, probe.deliveryID)
		}
		a := <-answered
		var claimStatus string
		err = r.h.db.QueryRow(ctx, `SELECT coalesce((SELECT status FROM agent.idempotency_keys WHERE key = $1), 'none')`,
			probe.deliveryID).Scan(&claimStatus)
		if err != nil {
			return err
		}
		r.note("cut %d connections after the %s insert of %s committed; %s answered %d %s after %s; its claim then: %s",
			cut, marker, probe.deliveryID, r.victim.name, a.status, a.answer, a.took.Round(time.Millisecond), claimStatus)
		// Claim releases the claim its failed statement may have written,
		// within its release timeout; when the database is not back
		// within it (a busy machine reconnecting after the cut), the
		// claim falls to its lease, which verify checks passes. What
		// must never happen is a failed claim left without the attempt.
		if marker == "cutclaim" && claimStatus == "processing" {
			if line := r.victim.logLine(probe.deliveryID, "release the claim the failed statement may have written"); line != "" {
				r.note("its release of the claim did not reach the database within the release timeout, so the claim waits out its lease: %s", line)
			} else {
				r.t.Errorf("the claim whose insert reply was lost is still processing after %s answered, and %s never tried to release it: "+
					"Claim did not release it, and the delivery waits out a lease", r.victim.name, r.victim.name)
			}
		}
		return nil
	}
}

// restartPostgresMidBurst crashes PostgreSQL (immediate) while the burst is
// being delivered to every replica, and starts it a second later. What was
// refused with 503 meanwhile stored nothing half-way, and its redelivery
// is applied once.
func restartPostgresMidBurst(ctx context.Context, r *inboxRun) error {
	for r.sentCount.Load() < int64(len(r.jobs)/3) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	from, sentBefore := time.Now(), r.sentCount.Load()
	if err := r.h.pg.Crash(); err != nil {
		return err
	}
	time.Sleep(pgDownFor)
	if err := r.h.pg.Start(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.downs = append(r.downs, window{from, time.Now().Add(downMargin)})
	r.mu.Unlock()
	r.note("PostgreSQL immediate restart after %d of %d deliveries were sent, down for %s (%d sent by then)",
		sentBefore, len(r.jobs), time.Since(from).Round(time.Millisecond), r.sentCount.Load())
	return nil
}

// runInboxScenario runs sc and checks the inbox's promises, returning the
// summary line.
func runInboxScenario(t *testing.T, h *harness, sc inboxScenario) string {
	ctx := t.Context()
	began := time.Now()
	badBefore := make([]int, len(h.replicas))
	for i, rep := range h.replicas {
		bad, _ := rep.logProblems()
		badBefore[i] = len(bad)
	}
	r, err := setupInboxRun(ctx, t, h, sc)
	if err != nil {
		t.Fatal(err)
	}
	if sc.name == "InboxPostgresRestartMidBurst" {
		// The whole burst goes to every replica, not one victim.
		r.victim = nil
	}
	if sc.holdsFirst {
		r.ready = make(chan struct{})
	}
	faultDone := make(chan error, 1)
	go func() {
		defer r.armed() // a fault that failed early must not hold the burst
		faultDone <- sc.fault(ctx, r)
	}()
	if r.victim == nil {
		r.burstAll(ctx)
	} else {
		r.burst(ctx)
	}
	if err := <-faultDone; err != nil {
		t.Errorf("fault: %v", err)
	}
	burstEnd := time.Now()
	// A few leases: the victim's claims pass, the appliers poll, the
	// backoffs of failed attempts run out.
	settle := 4*h.cfg.lease + idleBound + 15*time.Second
	r.redeliver(ctx, time.Now().Add(settle))
	acked := time.Now()
	applied := r.waitApplied(ctx, time.Now().Add(settle))
	violations := r.verify(ctx)

	r.mu.Lock()
	attempts := slices.Clone(r.attempts)
	notes := slices.Clone(r.notes)
	downs := slices.Clone(r.downs)
	stalledFrom := r.stalledFrom
	nAcked := len(r.acked)
	r.mu.Unlock()
	var noAnswer, unavailable, other5xx, copies int
	var slowestHealthy time.Duration
	for _, a := range attempts {
		switch {
		case a.status == 0:
			noAnswer++
		case a.status == http.StatusServiceUnavailable:
			unavailable++
			if !inWindows(a.at.Add(a.took), downs) && a.replica != nameOf(r.victim) {
				violations = append(violations, fmt.Sprintf("%s answered 503 for %s at %s outside any database outage",
					a.replica, a.delivery, a.at.Format(time.StampMilli)))
			}
		case a.status >= 500:
			other5xx++
			violations = append(violations, fmt.Sprintf("%s answered %d %s for %s", a.replica, a.status, a.answer, a.delivery))
		case a.status != http.StatusOK:
			violations = append(violations, fmt.Sprintf("%s answered %d %s for %s, want 200", a.replica, a.status, a.answer, a.delivery))
		case strings.HasPrefix(a.answer, "dropped"):
			copies++
		}
		// How fast the healthy replicas answered while the victim was
		// stopped is reported; that none of their sessions waited for
		// the victim's locks is checked (stallAndKillMidBurst), as on a
		// busy machine an answer is slow without waiting for anyone.
		if a.replica != nameOf(r.victim) && !stalledFrom.IsZero() && a.at.After(stalledFrom) {
			slowestHealthy = max(slowestHealthy, a.took)
		}
	}
	summary := fmt.Sprintf("%s: %d deliveries, %d acknowledged, %d applied once, %d attempts (%d unanswered, %d 503s, %d other 5xx, %d copies dropped), "+
		"slowest healthy redelivery %s, burst %s, acknowledged after %s, applied after %s",
		sc.name, len(r.jobs), nAcked, applied, len(attempts), noAnswer, unavailable, other5xx, copies,
		slowestHealthy.Round(time.Millisecond), burstEnd.Sub(began).Round(100*time.Millisecond),
		acked.Sub(began).Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))
	t.Log(summary)
	for _, n := range notes {
		t.Log("  " + n)
	}
	failWith(t, violations, 30)
	for i, rep := range h.replicas {
		bad, _ := rep.logProblems()
		for _, line := range bad[min(badBefore[i], len(bad)):] {
			t.Errorf("%s logged: %s", rep.name, line)
		}
	}
	h.logTails(t)
	return summary
}

// burstAll sends every delivery once, to the replicas in turn.
func (r *inboxRun) burstAll(ctx context.Context) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				r.sentCount.Add(1)
				r.send(ctx, r.h.replicas[i%len(r.h.replicas)], r.jobs[i])
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	for i := range r.jobs {
		work <- i
	}
	close(work)
	wg.Wait()
}

func nameOf(rep *replica) string {
	if rep == nil {
		return ""
	}
	return rep.name
}

func inWindows(at time.Time, ws []window) bool {
	for _, w := range ws {
		if !at.Before(w.from) && !at.After(w.to) {
			return true
		}
	}
	return false
}

// waitApplied waits until every job has succeeded, and returns how many
// have.
func (r *inboxRun) waitApplied(ctx context.Context, deadline time.Time) int {
	ids := make([]string, len(r.jobs))
	for i, j := range r.jobs {
		ids[i] = j.id
	}
	var n int
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if err := r.h.db.QueryRow(ctx, `SELECT count(*) FROM agent.provider_jobs WHERE id = ANY($1::uuid[]) AND status = 'succeeded'`,
			ids).Scan(&n); err == nil && n == len(ids) {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
	return n
}

// verify checks, from the database, that every acknowledged delivery took
// effect exactly once and that nothing was left unfinished.
func (r *inboxRun) verify(ctx context.Context) []string {
	var out []string
	r.mu.Lock()
	acked := make(map[string]bool, len(r.acked))
	for k, v := range r.acked {
		acked[k] = v
	}
	r.mu.Unlock()
	for _, j := range r.jobs {
		var status string
		var version int64
		if err := r.h.db.QueryRow(ctx, `SELECT status, version FROM agent.provider_jobs WHERE id = $1`, j.id).Scan(&status, &version); err != nil {
			out = append(out, fmt.Sprintf("job %s: %v", j.id, err))
			continue
		}
		switch {
		case !acked[j.deliveryID]:
			out = append(out, fmt.Sprintf("delivery %s was never acknowledged", j.deliveryID))
		case status != "succeeded":
			out = append(out, fmt.Sprintf("delivery %s was acknowledged and its job is %s (version %d): lost", j.deliveryID, status, version))
		case version != 2:
			out = append(out, fmt.Sprintf("job of %s has version %d, want 2: applied %d times", j.deliveryID, version, version-1))
		}
		var inbox string
		var copies int64
		err := r.h.db.QueryRow(ctx, `SELECT i.status || coalesce(' ' || i.reason, ''), coalesce(c.duplicates + c.hash_mismatches + c.path_mismatches, 0)
			FROM agent.provider_inbox i LEFT JOIN agent.provider_inbox_copies c ON c.inbox_id = i.id
			WHERE i.provider = 'acme' AND i.delivery_id = $1`, j.deliveryID).Scan(&inbox, &copies)
		if err != nil {
			out = append(out, fmt.Sprintf("arrival of %s: %v", j.deliveryID, err))
		} else if inbox != "applied" {
			out = append(out, fmt.Sprintf("arrival of %s is %s, want applied", j.deliveryID, inbox))
		}
	}
	var stuck int
	if err := r.h.db.QueryRow(ctx, `SELECT count(*) FROM agent.idempotency_keys WHERE organization_id = $1 AND status <> 'completed'`,
		r.org).Scan(&stuck); err != nil || stuck != 0 {
		out = append(out, fmt.Sprintf("%d webhook claims of the scenario left processing (%v)", stuck, err))
	}
	var rows int
	if err := r.h.db.QueryRow(ctx, `SELECT count(*) FROM agent.provider_inbox WHERE organization_id = $1`, r.org).Scan(&rows); err != nil ||
		rows != len(r.jobs) {
		out = append(out, fmt.Sprintf("%d arrivals for %d deliveries (%v), want one each", rows, len(r.jobs), err))
	}
	return out
}
