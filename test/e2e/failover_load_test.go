//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/client"
	"github.com/searchd/searchd/idempotency"
)

// The failover suite's other two loads: a provider delivering callbacks
// for its jobs, and agent runtimes making tool calls through the journal.

// callbackJobs is how many provider jobs receive deliveries, each from a
// sender of its own, one delivery at a time.
const callbackJobs = 4

// deliveryTimeout bounds how long a provider keeps redelivering one
// delivery before the suite calls it lost.
const deliveryTimeout = time.Minute

// cbJob is a registered provider job.
type cbJob struct {
	id, providerJobID, path string
}

// cbDelivery is one delivery as the provider saw it.
type cbDelivery struct {
	job      *cbJob
	id       string
	acked    bool   // answered 200: accepted, queued, or dropped as a duplicate
	answer   string // accepted, queued, or the drop reason
	attempts int
}

// callbackLoad is the provider: each job's sender delivers running updates
// with a growing seq, and redelivers one (same id, same body, signed anew)
// on every 503 or lost answer until it is answered 200, as a provider
// does; only then does it send the next.
type callbackLoad struct {
	s *scenarioRun
	// org is the organization of the jobs and their Runs: one of its own,
	// so the start checks see only the starts' Runs.
	org      uuid.UUID
	wh       *standardwebhooks.Webhook
	hc       *http.Client
	jobs     []*cbJob
	probe    *cbJob // the job of wedgeDelivery's delivery, when it ran
	next     atomic.Uint64
	rec      *recorder
	mu       sync.Mutex
	sent     []*cbDelivery
	failures []string
}

// newCallbackLoad registers the jobs of org, each for a direct Run of its
// own.
func newCallbackLoad(ctx context.Context, s *scenarioRun, org uuid.UUID) (*callbackLoad, error) {
	wh, err := standardwebhooks.NewWebhookRaw([]byte(failoverSecret))
	if err != nil {
		return nil, err
	}
	cb := &callbackLoad{s: s, org: org, wh: wh, hc: &http.Client{Timeout: 3 * time.Second}, rec: &recorder{}}
	token, err := auth.SignToken([]byte(jwtSecret), cb.org, "e2e-provider", time.Now(), 24*time.Hour)
	if err != nil {
		return nil, err
	}
	c, err := newClient("callback-setup", token, s.h.replicas, 0, loadPolicy, &recorder{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i := range callbackJobs {
		run, err := c.StartRun(ctx, client.DirectStart{Kind: client.KindCapability, Name: "e2e provider run",
			Input: map[string]any{"job": i}}, client.WithIdempotencyKey(fmt.Sprintf("%s-cbrun-%d", s.name, i)))
		if err != nil {
			return nil, fmt.Errorf("starting the Run of job %d: %w", i, err)
		}
		pj := fmt.Sprintf("%s-pj-%d", s.name, i)
		reg, err := c.RegisterProviderJob(ctx, client.RegisterProviderJobParams{RunID: run.Run.ID, Provider: e2eProvider, ProviderJobID: pj})
		if err != nil {
			return nil, fmt.Errorf("registering job %d: %w", i, err)
		}
		cb.jobs = append(cb.jobs, &cbJob{id: reg.Job.ID, providerJobID: pj, path: reg.Job.CallbackPath})
	}
	return cb, nil
}

// send delivers to job until stop is set or a delivery is lost.
func (cb *callbackLoad) send(ctx context.Context, job *cbJob, stop *atomic.Bool) {
	for seq := 1; !stop.Load() && ctx.Err() == nil; seq++ {
		d := cb.deliver(ctx, job, seq)
		cb.mu.Lock()
		cb.sent = append(cb.sent, d)
		cb.mu.Unlock()
		if !d.acked {
			return
		}
		time.Sleep(10*time.Millisecond + rand.N(20*time.Millisecond))
	}
}

// deliver sends one delivery until it is answered 200, round robin over
// the replicas.
func (cb *callbackLoad) deliver(ctx context.Context, job *cbJob, seq int) *cbDelivery {
	d := &cbDelivery{job: job, id: fmt.Sprintf("%s-%s-d%05d", cb.s.name, job.providerJobID, seq)}
	body, _ := json.Marshal(map[string]any{"job_id": job.providerJobID, "status": "running",
		"result": map[string]any{"seq": seq}})
	deadline := time.Now().Add(deliveryTimeout)
	for ctx.Err() == nil {
		if time.Now().After(deadline) {
			cb.fail("delivery %s: not answered 200 within %s (%d attempts)", d.id, deliveryTimeout, d.attempts)
			return d
		}
		d.attempts++
		r := cb.s.h.replicas[int(cb.next.Add(1))%len(cb.s.h.replicas)]
		now := time.Now()
		sig, _ := cb.wh.Sign(d.id, now, body)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.URL()+job.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.HeaderDeliveryID, d.id)
		req.Header.Set(api.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(api.HeaderSignature, sig)
		a := attempt{sent: time.Now(), client: "provider." + job.providerJobID, replica: r.name, key: d.id}
		res, err := cb.hc.Do(req)
		if err != nil {
			a.at, a.failure = time.Now(), err.Error()
			cb.rec.add(a)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		a.at, a.status = time.Now(), res.StatusCode
		var ans struct{ Status, Reason, Code string }
		_ = json.Unmarshal(raw, &ans)
		a.code = ans.Code
		cb.rec.add(a)
		switch {
		case res.StatusCode == http.StatusOK && ans.Status == "accepted":
			d.acked, d.answer = true, "accepted"
			return d
		case res.StatusCode == http.StatusOK && ans.Status == "queued":
			// Landed in the inbox, its apply left to the applier.
			d.acked, d.answer = true, "queued"
			return d
		case res.StatusCode == http.StatusOK && ans.Status == "dropped" && ans.Reason == "duplicate":
			// A copy of a delivery an earlier attempt landed in the inbox:
			// the provider is told it is done, whether it is applied yet
			// or not.
			d.acked, d.answer = true, "duplicate"
			return d
		case res.StatusCode == http.StatusServiceUnavailable:
			time.Sleep(100 * time.Millisecond)
		default:
			cb.fail("delivery %s: %s answered %d %s", d.id, r.name, res.StatusCode, raw)
			return d
		}
	}
	return d
}

func (cb *callbackLoad) fail(format string, args ...any) {
	cb.mu.Lock()
	cb.failures = append(cb.failures, fmt.Sprintf(format, args...))
	cb.mu.Unlock()
}

// applyWait bounds waiting, at the end, for the acknowledged deliveries to
// be applied and the inbox to hold none pending. A delivery acknowledged
// while the primary died is applied by an applier on the new primary once
// its arrival's lease and then its claim's (a lease each) have passed; an
// applier whose polls failed through the outage waits up to its
// MaxIdleBackoff (30 s) before the next, unless a redelivery wakes it. So
// the bound is that backoff and a few leases.
func applyWait(lease time.Duration) time.Duration { return 30*time.Second + 4*lease }

// verify checks, on the new primary, that every acknowledged delivery was
// applied exactly once: each job's version, which grows by one with every
// applied delivery, must come to 1 + the deliveries acknowledged for it,
// and no arrival of the jobs may be left pending in the inbox (both are
// read until they hold, for up to applyWait). The check reads the jobs,
// not how a delivery was applied, so it holds for any design of the
// callback path. For a job short of deliveries it names those whose claim
// is not completed, and it wants no delivery claim left processing past
// its lease, no answer but 200 and 503, and no 503 while a writable server
// was there. There is no excuse: an acknowledged delivery is committed in
// the inbox before its answer, so one the primary took down with it inside
// its apply is applied by the applier on the new primary. With a probe
// (wedgeDelivery) it also wants the probe's arrival applied by the applier,
// and records that in rep.probeBy.
func (cb *callbackLoad) verify(ctx context.Context, s *scenarioRun, rep *failoverReport) []string {
	cb.mu.Lock()
	sent := append([]*cbDelivery(nil), cb.sent...)
	out := append([]string(nil), cb.failures...)
	cb.mu.Unlock()
	acked := map[string]int64{}
	for _, d := range sent {
		if d.acked {
			acked[d.job.id]++
			rep.deliveries++
		}
	}
	applied := map[string]int64{}
	wait := applyWait(s.h.cfg.lease)
	var pending []string
	for deadline := time.Now().Add(wait); ; time.Sleep(100 * time.Millisecond) {
		rows, err := s.h.db.Query(ctx, `SELECT id::text, version - 1 FROM agent.provider_jobs WHERE organization_id = $1`, cb.org)
		if err != nil {
			return append(out, fmt.Sprintf("reading the jobs: %v", err))
		}
		short := false
		for rows.Next() {
			var id string
			var n int64
			if err := rows.Scan(&id, &n); err == nil {
				applied[id] = n
				short = short || n < acked[id]
			}
		}
		rows.Close()
		pending = pending[:0]
		rows, err = s.h.db.Query(ctx, `SELECT delivery_id || ' (' || attempts || ' attempts; last error: ' || coalesce(last_error, 'none') || ')'
			FROM agent.provider_inbox WHERE organization_id = $1 AND status = 'pending' ORDER BY delivery_id`, cb.org)
		if err != nil {
			return append(out, fmt.Sprintf("reading the inbox: %v", err))
		}
		for rows.Next() {
			var d string
			if err := rows.Scan(&d); err == nil {
				pending = append(pending, d)
			}
		}
		rows.Close()
		if !short && len(pending) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(pending) > 0 {
		out = append(out, fmt.Sprintf("%d arrivals still pending in the inbox %s after the load: %s", len(pending), wait, strings.Join(pending, ", ")))
	}
	if cb.probe != nil {
		var status, by string
		err := s.h.db.QueryRow(ctx, `SELECT i.status, coalesce(i.applied_by, '') FROM agent.provider_inbox i
			WHERE i.organization_id = $1 AND i.job_id = $2::uuid`, cb.org, cb.probe.id).Scan(&status, &by)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("reading the probe delivery's arrival: %v", err))
		case status != "applied" || by != "applier":
			// The kill found its apply waiting on the harness's lock on
			// the old primary: only an applier on the new one can have
			// applied it.
			out = append(out, fmt.Sprintf("the probe delivery held inside its apply at the kill: arrival %s by %q, want applied by the applier", status, by))
		}
		rep.probeBy = by
	}

	claims := map[string]string{}
	passed := map[string]time.Duration{}
	rows, err := s.h.db.Query(ctx, `SELECT key, status, extract(epoch FROM now() - lease_expires_at)::float8
		FROM agent.idempotency_keys WHERE organization_id = $1 AND scope = $2`, cb.org, idempotency.WebhookScopePrefix+e2eProvider)
	if err != nil {
		return append(out, fmt.Sprintf("reading the delivery claims: %v", err))
	}
	for rows.Next() {
		var k, st string
		var p float64
		if err := rows.Scan(&k, &st, &p); err == nil {
			claims[k], passed[k] = st, time.Duration(p*float64(time.Second))
		}
	}
	rows.Close()
	for _, j := range cb.jobs {
		switch a, n := acked[j.id], applied[j.id]; {
		case n < a:
			var suspects []string
			for _, d := range sent {
				if d.job != j || !d.acked || claims[d.id] == "completed" {
					continue
				}
				st := claims[d.id]
				if st == "" {
					st = "absent"
				}
				suspects = append(suspects, fmt.Sprintf("%s (answered %s after %d attempts; claim %s)", d.id, d.answer, d.attempts, st))
			}
			rep.deliveriesLost += int(a - n)
			out = append(out, fmt.Sprintf("job %s: %d deliveries acknowledged, %d applied within %s of the end; not completed: %s",
				j.providerJobID, a, n, wait, strings.Join(suspects, ", ")))
		case n > a:
			rep.appliedTwice += int(n - a)
			out = append(out, fmt.Sprintf("job %s: %d deliveries acknowledged, %d applied", j.providerJobID, a, n))
		}
	}
	for k, st := range claims {
		if st == "processing" && passed[k] > stuckMargin {
			out = append(out, fmt.Sprintf("delivery %s: claim still processing %s after its lease passed", k, passed[k].Round(time.Millisecond)))
		}
	}
	out = append(out, checkAnswers(cb.rec.all(), s)...)
	return out
}

// checkAnswers wants every attempt answered 2xx, or 503 unavailable while
// no writable server was there (and the margin after).
func checkAnswers(attempts []attempt, s *scenarioRun) []string {
	s.mu.Lock()
	downs := append([]window(nil), s.downs...)
	s.mu.Unlock()
	var out []string
	for _, a := range attempts {
		down := false
		for _, w := range downs {
			down = down || !a.at.Before(w.from) && !a.at.After(w.to)
		}
		switch {
		case a.status == 0 || a.status >= 200 && a.status < 300:
		case a.status == http.StatusServiceUnavailable && a.code == "unavailable" && down:
		default:
			out = append(out, fmt.Sprintf("%s: %s answered %d %s at %s", a.key, a.replica, a.status, a.code, a.at.Format("15:04:05.000")))
		}
	}
	return out
}

// The suite's tool calls go through the journal as the agent runtime's
// Runner (module toolrun) makes them, with the plane's statements alone, to
// a vendor that honours the key: a call reclaimed after a crash is sent
// again with the same key and the vendor answers its first result.
// toolLease is the Runner's lease of a 1 s tool (toolrun.ToolSpec.Lease).
const (
	toolScope = idempotency.ToolScopePrefix + "e2e.send"
	toolLease = 16 * time.Second
)

// vendor is the outside service the tool calls. It answers a repeated key
// with its first result, and remembers when each key was called.
type vendor struct {
	mu    sync.Mutex
	calls map[string][]time.Time
	first map[string]string
}

// call sends the message of key and returns the vendor's message id.
func (v *vendor) call(key string) string {
	time.Sleep(2 * time.Millisecond)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls[key] = append(v.calls[key], time.Now())
	if id, ok := v.first[key]; ok {
		return id
	}
	id := "msg-" + uuid.NewString()
	v.first[key] = id
	return id
}

// callsAfter counts the vendor's calls of key after t.
func (v *vendor) callsAfter(key string, t time.Time) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, at := range v.calls[key] {
		if at.After(t) {
			n++
		}
	}
	return n
}

// toolWorker is one agent runtime: its own pool on the pair's multi-host
// URL, and a Run whose calls it makes one after another.
type toolWorker struct {
	name  string
	pool  *pgxpool.Pool
	plane *idempotency.Service
	runID uuid.UUID
}

// call makes the call key once through the journal, as the Runner does: a
// completed call answers its stored message id, replayed; otherwise the
// call is claimed, the vendor called with the key, and the claim completed
// with the vendor's answer (on a context of its own, as the Runner ends a
// claim). A live claim of another attempt is an *idempotency.InFlightError.
func (w *toolWorker) call(ctx context.Context, org uuid.UUID, key string, v *vendor) (id string, replayed bool, err error) {
	out, err := w.plane.Read(ctx, org, toolScope, key, "h")
	if err == nil && out.Kind == idempotency.KindAbsent {
		out, err = w.plane.Claim(ctx, org, toolScope, key, "h", toolLease)
	}
	switch {
	case err != nil:
		return "", false, err
	case out.Kind == idempotency.KindCompleted:
		return out.ResourceID, true, nil
	case out.Kind == idempotency.KindProcessing:
		return "", false, out.InFlight(toolScope, key)
	case out.Kind != idempotency.KindClaimed:
		return "", false, fmt.Errorf("the journal answered %s", out.Kind)
	}
	id = v.call(key)
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ok, err := w.plane.Complete(ectx, out.Claim, idempotency.Completion{ResourceType: "e2e_message", ResourceID: id,
		Response: json.RawMessage(`{"ok":true,"outcome":"ok"}`)})
	switch {
	case err != nil:
		return "", false, err
	case !ok:
		return "", false, errors.New("the claim's fence was lost")
	}
	return id, false, nil
}

// toolCall is one call a worker made and what it was answered.
type toolCall struct {
	w        *toolWorker
	n        int
	key      string
	acked    bool
	ackedAt  time.Time
	id       string // the vendor's message id
	replayed bool
}

// toolLoad is the agent runtimes: three workers that make calls through
// the journal and retry each, as an orchestrator retries a failed step,
// until it is answered.
type toolLoad struct {
	s        *scenarioRun
	vendor   *vendor
	workers  []*toolWorker
	mu       sync.Mutex
	calls    []*toolCall
	failures []string
}

// newToolLoad makes the agent runtimes, each with a pool of its own on the
// database dbURL names (given the parameters to add).
func newToolLoad(ctx context.Context, s *scenarioRun, dbURL func(params string) string) (*toolLoad, error) {
	tl := &toolLoad{s: s, vendor: &vendor{calls: map[string][]time.Time{}, first: map[string]string{}}}
	for i := range 3 {
		name := fmt.Sprintf("e2e-tools-%s-%d", s.name, i+1)
		pool, err := pgxpool.New(ctx, dbURL("pool_max_conns=2&connect_timeout=10&application_name="+name))
		if err != nil {
			tl.close()
			return nil, err
		}
		tl.workers = append(tl.workers, &toolWorker{name: name, pool: pool, runID: uuid.New(),
			plane: idempotency.NewService(pool, idempotency.Config{})})
	}
	return tl, nil
}

func (tl *toolLoad) close() {
	for _, w := range tl.workers {
		w.pool.Close()
	}
}

// callTimeout bounds one call: a claim orphaned by the crash blocks it
// for up to the tool's lease, after the outage.
func (tl *toolLoad) callTimeout() time.Duration { return toolLease + 45*time.Second }

func (tl *toolLoad) run(ctx context.Context, w *toolWorker, stop *atomic.Bool) {
	for n := 1; !stop.Load() && ctx.Err() == nil; n++ {
		c := tl.execute(ctx, w, n, false)
		tl.mu.Lock()
		tl.calls = append(tl.calls, c)
		tl.mu.Unlock()
		if !c.acked {
			return
		}
		time.Sleep(5*time.Millisecond + rand.N(10*time.Millisecond))
	}
}

// execute makes call n of w until it is answered; a replay asks for the
// call again after the load, the way a restarted segment does.
func (tl *toolLoad) execute(ctx context.Context, w *toolWorker, n int, replay bool) *toolCall {
	c := &toolCall{w: w, n: n, key: fmt.Sprintf("tk1_%s_%d", w.runID, n)}
	deadline := time.Now().Add(tl.callTimeout())
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		id, replayed, err := w.call(actx, tl.s.org, c.key, tl.vendor)
		cancel()
		if err == nil {
			c.acked, c.ackedAt, c.id, c.replayed = true, time.Now(), id, replayed
			return c
		}
		if time.Now().After(deadline) {
			tl.fail("%s call %d (replay %v): not answered within %s: %v", w.name, n, replay, tl.callTimeout(), err)
			return c
		}
		var inFlight *idempotency.InFlightError
		if errors.As(err, &inFlight) {
			time.Sleep(min(max(inFlight.RetryAfter, 50*time.Millisecond), 500*time.Millisecond))
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return c
}

func (tl *toolLoad) fail(format string, args ...any) {
	tl.mu.Lock()
	tl.failures = append(tl.failures, fmt.Sprintf(format, args...))
	tl.mu.Unlock()
}

// verify replays every acknowledged call, as a restarted segment would:
// each must answer its stored result, marked replayed, without reaching
// the vendor. A call the vendor received again after its answer was
// acknowledged is a completion the failover lost (here harmless, because
// the vendor dedupes on the key; against a vendor that does not, a second
// effect). Then no tool claim may be left processing.
func (tl *toolLoad) verify(ctx context.Context, s *scenarioRun, rep *failoverReport) []string {
	tl.mu.Lock()
	calls := append([]*toolCall(nil), tl.calls...)
	tl.mu.Unlock()
	var mu sync.Mutex
	var out []string
	work := make(chan *toolCall)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for c := range work {
				again := tl.execute(ctx, c.w, c.n, true)
				mu.Lock()
				switch {
				case !again.acked:
				case !again.replayed:
					out = append(out, fmt.Sprintf("%s call %d: acknowledged %s, then executed again instead of replayed",
						c.w.name, c.n, c.id))
				case again.id != c.id:
					out = append(out, fmt.Sprintf("%s call %d: acknowledged %s, replayed %s", c.w.name, c.n,
						c.id, again.id))
				}
				mu.Unlock()
			}
		})
	}
	for _, c := range calls {
		if c.acked {
			rep.toolCalls++
			work <- c
		}
	}
	close(work)
	wg.Wait()
	for _, c := range calls {
		if c.acked && tl.vendor.callsAfter(c.key, c.ackedAt) > 0 {
			rep.toolsRepeated++
			out = append(out, fmt.Sprintf("%s call %d: the vendor was called again after its answer was acknowledged", c.w.name, c.n))
		}
	}
	var stuck int
	if err := s.h.db.QueryRow(ctx, `SELECT count(*) FROM agent.idempotency_keys
		WHERE organization_id = $1 AND scope = $2 AND status = 'processing'`, s.org, toolScope).Scan(&stuck); err != nil {
		out = append(out, fmt.Sprintf("reading the tool claims: %v", err))
	} else if stuck > 0 {
		out = append(out, fmt.Sprintf("%d tool claims left processing after every call was answered", stuck))
	}
	tl.mu.Lock()
	out = append(append([]string(nil), tl.failures...), out...)
	tl.mu.Unlock()
	return out
}

// wedgeDelivery holds one delivery between its claim and its apply at the
// moment of the kill: the harness locks the row of a job of its own (FOR
// UPDATE, on the primary), sends the job a delivery, and returns once a
// replica's apply waits on that lock. The arrival and the claim are
// committed by then (on the standby too, when replication is synchronous)
// and the apply is not, so the kill leaves the arrival pending and the
// claim processing. The provider redelivers, in the background, until a
// replica answers 200: queued (the handler's apply timed out on the lock)
// or a duplicate (a copy of the landed arrival), both acknowledgements
// that only the applier on the new primary can make good.
func (cb *callbackLoad) wedgeDelivery(ctx context.Context, s *scenarioRun, primary *postgres) error {
	token, err := auth.SignToken([]byte(jwtSecret), cb.org, "e2e-provider", time.Now(), 24*time.Hour)
	if err != nil {
		return err
	}
	c, err := newClient("callback-probe", token, s.h.replicas, 0, loadPolicy, &recorder{})
	if err != nil {
		return err
	}
	run, err := c.StartRun(ctx, client.DirectStart{Kind: client.KindCapability, Name: "e2e provider probe run"},
		client.WithIdempotencyKey(s.name+"-cbprobe"))
	if err != nil {
		return err
	}
	reg, err := c.RegisterProviderJob(ctx, client.RegisterProviderJobParams{RunID: run.Run.ID, Provider: e2eProvider, ProviderJobID: "pj-probe"})
	if err != nil {
		return err
	}
	job := &cbJob{id: reg.Job.ID, providerJobID: "pj-probe", path: reg.Job.CallbackPath}
	cb.jobs = append(cb.jobs, job)
	cb.probe = job
	conn, err := pgx.Connect(ctx, primary.URL(dbName)+"&application_name=e2e-wedge")
	if err != nil {
		return err
	}
	// The connection dies with the primary; closing it is for the error
	// paths alone.
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		conn.Close(ctx)
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT 1 FROM agent.provider_jobs WHERE id = $1 FOR UPDATE", job.id); err != nil {
		conn.Close(ctx)
		return err
	}
	s.bg.Go(func() {
		d := cb.deliver(ctx, job, 1)
		cb.mu.Lock()
		cb.sent = append(cb.sent, d)
		cb.mu.Unlock()
	})
	for deadline := time.Now().Add(wedgeTimeout); ; time.Sleep(20 * time.Millisecond) {
		var waiting int
		if err := s.h.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name LIKE 'searchd-f%' AND pg_blocking_pids(pid) = ARRAY[$1::int]`,
			int(conn.PgConn().PID())).Scan(&waiting); err != nil {
			conn.Close(ctx)
			return err
		}
		if waiting > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			conn.Close(ctx)
			return fmt.Errorf("the probe delivery did not reach its apply within %s", wedgeTimeout)
		}
	}
}
