package api_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/telemetry"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/seatqtest"
)

// fairBundle is a server whose pool (and so its seats) has a known size,
// beside the test's own pool for locks and counts, with its admission
// queue and metrics at hand.
type fairBundle struct {
	*bundle
	admin   *pgxpool.Pool
	metrics *telemetry.Metrics
}

// fairSetup starts a server on a pool of conns connections, its admission
// queue cfg with Seats the pool's size unless set (as cmd/searchd builds
// it) and the other settings at their defaults unless set; change, when
// given, changes its Deps further.
func fairSetup(t *testing.T, conns int32, cfg seatq.Config, change ...func(*api.Deps)) *fairBundle {
	t.Helper()
	url := pgtest.NewDBURL(t)
	open := func(n int32) *pgxpool.Pool {
		pc, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		pc.MaxConns = n
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	admin, pool := open(12), open(conns)
	metrics := telemetry.NewMetrics()
	if cfg.Seats == 0 {
		cfg.Seats = int(conns)
	}
	cfg.Observer = metrics
	q := seatqtest.New(t, cfg)
	if err := metrics.WatchSeats(q); err != nil {
		t.Fatal(err)
	}
	b := setup(t, setupOpts{pool: pool, deps: func(d *api.Deps) {
		d.Seats, d.Metrics = q, metrics
		for _, f := range change {
			f(d)
		}
	}})
	return &fairBundle{bundle: b, admin: admin, metrics: metrics}
}

// lockRows holds row locks on the saved searches ids, in a transaction of
// the test's pool, until the returned function is called (or the test
// ends): a PATCH of one of them waits on the lock holding its seat and
// its connection, as a slow request would.
func (b *fairBundle) lockRows(t *testing.T, ids ...uuid.UUID) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	var txs []pgx.Tx
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			for _, tx := range txs {
				_ = tx.Rollback(ctx)
			}
		})
	}
	t.Cleanup(unlock)
	// A transaction per row, each naming its organization: a cluster
	// locks rows in a statement routed to their one shard.
	for _, id := range ids {
		var org uuid.UUID
		if err := b.admin.QueryRow(ctx, `SELECT organization_id FROM agent.saved_searches WHERE id = $1`, id).Scan(&org); err != nil {
			t.Fatal(err)
		}
		tx, err := b.admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
		if _, err := tx.Exec(ctx, `SELECT 1 FROM agent.saved_searches WHERE organization_id = $1 AND id = $2 FOR UPDATE`, org, id); err != nil {
			t.Fatal(err)
		}
	}
	return unlock
}

// patchAsync sends a PATCH of saved search id with auth (nil: the
// bundle's) on its own goroutine.
func (b *fairBundle) patchAsync(id uuid.UUID, auth map[string]string) <-chan timedResponse {
	return b.sendAsync(req{method: http.MethodPatch, path: "/v1/saved-searches/" + id.String(),
		body: map[string]any{"name": "held " + uuid.NewString()[:8]}, header: auth})
}

// sendAsync sends req r on its own goroutine.
func (b *fairBundle) sendAsync(r req) <-chan timedResponse {
	ch := make(chan timedResponse, 1)
	go func() {
		res, err := b.send(r)
		ch <- timedResponse{res, err, time.Now()}
	}()
	return ch
}

// waitForLockWaiters waits until n backends wait on a lock.
func (b *fairBundle) waitForLockWaiters(t *testing.T, n int) {
	t.Helper()
	b.eventually(t, fmt.Sprintf("%d requests waiting on the row locks", n), func() bool {
		waiting, err := pgtest.LockWaits(context.Background(), b.admin)
		return err == nil && waiting >= n
	})
}

// waitForQueue waits until the seat queue holds what ok says.
func (b *fairBundle) waitForQueue(t *testing.T, what string, ok func(seatq.Stats) bool) seatq.Stats {
	t.Helper()
	var st seatq.Stats
	b.eventually(t, what, func() bool { st = b.admission.Stats(20); return ok(st) })
	return st
}

// wantServed waits for the answer of each of held (PATCHes that waited
// on locked rows), wanting 200, then until every seat is back: none in
// use and no flow left in the queue.
func (b *fairBundle) wantServed(t *testing.T, held []<-chan timedResponse) {
	t.Helper()
	for i, h := range held {
		if r := <-h; r.err != nil || r.res.status != http.StatusOK {
			t.Errorf("held PATCH %d = %+v %v, want 200", i, r.res, r.err)
		}
	}
	b.waitForQueue(t, "every seat back", func(st seatq.Stats) bool { return st.InUse == 0 && st.FlowsTotal == 0 })
}

func (b *fairBundle) eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s (queue %+v)", what, b.admission.Stats(20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flowOf returns the stats of flow f in st, zero when it is not there.
func flowOf(st seatq.Stats, kind seatq.Kind, name string) seatq.FlowStats {
	for _, f := range st.Flows {
		if f.Flow == (seatq.Flow{Kind: kind, Name: name}) {
			return f
		}
	}
	return seatq.FlowStats{}
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// TestOneOrganizationAloneUsesEverySeatAndItsBurstsAreQueued: on a
// server whose other organizations are idle, one organization is never
// capped: with all but one seat held by its slow requests its next
// request is served at once, and bursts beyond the seats (20 starts of
// one key, as many tabs would send; 32 starts of distinct keys) are
// queued and served, never refused: 201, 200 and 409 only, no 429.
func TestOneOrganizationAloneUsesEverySeatAndItsBurstsAreQueued(t *testing.T) {
	t.Parallel()
	b := fairSetup(t, 4, seatq.Config{})
	ss := b.seedSavedSearch(seedOpts{})
	held := make([]uuid.UUID, 3)
	for i := range held {
		held[i] = b.seedSavedSearch(seedOpts{}).ID
	}
	unlock := b.lockRows(t, held...)
	var holds []<-chan timedResponse
	for _, id := range held {
		holds = append(holds, b.patchAsync(id, nil))
	}
	b.waitForLockWaiters(t, 3)
	if res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches"}); res.status != http.StatusOK {
		t.Errorf("the organization's 4th request with 3 of its own on 4 seats = %d %s, want 200 at once", res.status, res.body)
	}
	unlock()
	for i, h := range holds {
		if r := <-h; r.err != nil || r.res.status != http.StatusOK {
			t.Errorf("held PATCH %d = %+v %v, want 200 once the lock went", i, r.res, r.err)
		}
	}

	statuses := func(n int, key func(i int) string) map[int]int {
		var mu sync.Mutex
		got := map[int]int{}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				res, err := b.startPrefer(ss.ID, key(i), "")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[res.status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		return got
	}
	if got := statuses(20, func(int) string { return "one-key" }); got[http.StatusCreated] != 1 ||
		got[http.StatusCreated]+got[http.StatusOK]+got[http.StatusConflict] != 20 {
		t.Errorf("20 concurrent starts of one key answered %v, want one 201 and only 200s and 409s besides", got)
	}
	if got := statuses(32, func(i int) string { return "key-" + strconv.Itoa(i) }); got[http.StatusCreated] != 32 {
		t.Errorf("32 concurrent starts of distinct keys answered %v, want 32 201s", got)
	}
	body := string(b.do(req{method: http.MethodGet, path: "/metrics", noAuth: true}).body)
	for _, l := range strings.Split(grepLines(body, "searchd_admission_refused_total{"), "\n") {
		if !strings.HasSuffix(l, " 0") {
			t.Errorf("a refusal counted: %s", l)
		}
	}
}

// TestALightOrganizationGetsTheNextTurnBeforeAHeavyOnesQueue: a heavy
// organization holds all 4 seats with slow requests (PATCHes waiting on
// row locks) and queues two more slow ones; then a light organization
// sends one request. Of the next two seats that free, the first goes to
// the heavy organization (its turn came first) and the second to the
// light one, ahead of the heavy organization's older request, which still
// waits: the light one waited for one request of the busier organization,
// not for its whole queue.
func TestALightOrganizationGetsTheNextTurnBeforeAHeavyOnesQueue(t *testing.T) {
	t.Parallel()
	b := fairSetup(t, 4, seatq.Config{})
	ids := make([]uuid.UUID, 6)
	for i := range ids {
		ids[i] = b.seedSavedSearch(seedOpts{}).ID
	}
	unlocks := make([]func(), 6)
	for i, id := range ids {
		unlocks[i] = b.lockRows(t, id)
	}
	heavy := make([]<-chan timedResponse, 6)
	for i := range 4 {
		heavy[i] = b.patchAsync(ids[i], nil)
	}
	b.waitForLockWaiters(t, 4)
	heavy[4], heavy[5] = b.patchAsync(ids[4], nil), b.patchAsync(ids[5], nil)
	b.waitForQueue(t, "the heavy organization's two requests queued", func(st seatq.Stats) bool { return st.Queued == 2 })
	light := uuid.New()
	lightRes := b.sendAsync(req{method: http.MethodGet, path: "/v1/saved-searches", header: bearer(b.tokenFor(light, "light"))})
	b.waitForQueue(t, "the light organization queued", func(st seatq.Stats) bool { return st.Queued == 3 && st.Waiting == 2 })

	unlocks[0]() // a seat frees: the heavy organization's turn
	b.waitForLockWaiters(t, 4)
	b.waitForQueue(t, "one heavy request seated", func(st seatq.Stats) bool { return st.Queued == 2 })
	unlocks[1]() // the next: the light organization's turn
	select {
	case r := <-lightRes:
		if r.err != nil || r.res.status != http.StatusOK {
			t.Fatalf("the light organization = %+v %v, want 200", r.res, r.err)
		}
	case <-time.After(8 * time.Second):
		t.Fatalf("the light organization was not served on the second freed seat (queue %+v)", b.admission.Stats(20))
	}
	for _, u := range unlocks {
		u()
	}
	b.wantServed(t, heavy)
}

// TestRefusalsAnswer429WithRetryAfterAndAreCounted: with both seats held,
// one request waits (the queue holds one per organization); the next is
// refused at once, 429 rate_limited with Retry-After, and the waiting one
// is refused when the longest wait passes. Each is counted by reason, no
// series names the organization, and the held requests still end 200.
func TestRefusalsAnswer429WithRetryAfterAndAreCounted(t *testing.T) {
	t.Parallel()
	b := fairSetup(t, 2, seatq.Config{QueueLength: 1, MaxWait: 500 * time.Millisecond})
	ids := []uuid.UUID{b.seedSavedSearch(seedOpts{}).ID, b.seedSavedSearch(seedOpts{}).ID}
	unlock := b.lockRows(t, ids...)
	held := []<-chan timedResponse{b.patchAsync(ids[0], nil), b.patchAsync(ids[1], nil)}
	b.waitForLockWaiters(t, 2)
	sent := time.Now()
	waiting := b.sendAsync(req{method: http.MethodGet, path: "/v1/runs"})
	b.waitForQueue(t, "one request waiting", func(st seatq.Stats) bool { return st.Queued == 1 })

	check := func(what string, res *response, reason string) {
		t.Helper()
		p := res.problem(t)
		secs, err := strconv.Atoi(res.header.Get("Retry-After"))
		if res.status != http.StatusTooManyRequests || p.Code != api.CodeRateLimited || err != nil || secs < 1 || !strings.Contains(p.Detail, reason) {
			t.Errorf("%s = %d %s Retry-After %q, want 429 rate_limited saying %q with Retry-After in seconds",
				what, res.status, res.body, res.header.Get("Retry-After"), reason)
		}
	}
	check("a request beyond the queue", b.do(req{method: http.MethodGet, path: "/v1/saved-searches"}), "already has 1 requests waiting")
	r := <-waiting
	if r.err != nil {
		t.Fatal(r.err)
	}
	if waited := r.at.Sub(sent); waited < 500*time.Millisecond {
		t.Errorf("the waiting request was refused after %s, before the longest wait", waited)
	}
	check("a request past the longest wait", r.res, "did not come within 500ms")

	body := string(b.do(req{method: http.MethodGet, path: "/metrics", noAuth: true}).body)
	for _, want := range []string{
		`searchd_admission_refused_total{kind="organization",reason="queue_full"} 1`,
		`searchd_admission_refused_total{kind="organization",reason="wait_timeout"} 1`,
		`searchd_admission_seats 2`,
		`searchd_admission_seats_in_use 2`,
		`searchd_admission_wait_seconds_count{kind="organization"} 2`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(body, "searchd_admission"))
		}
	}
	if strings.Contains(body, b.org.String()) {
		t.Errorf("the metrics name the organization:\n%s", grepLines(body, b.org.String()))
	}
	unlock()
	b.wantServed(t, held)
}

// TestAWaitPastTheLongestWhileTheDatabaseDoesNotAnswerIs503: with both
// seats held by requests waiting on the database and readiness saying the
// database does not answer (a blackholed primary holds every seat so), a
// request that waits out the longest wait answers the outage's 503
// unavailable with Retry-After, not 429 (issue 24.11); a request beyond
// its organization's queue is still its own 429.
func TestAWaitPastTheLongestWhileTheDatabaseDoesNotAnswerIs503(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	// The longest wait is the window in which the request beyond the queue
	// must be refused while the first one waits: 5 s, so a loaded machine
	// (seen at 500 ms) cannot let the waiting request time out first.
	b := fairSetup(t, 2, seatq.Config{QueueLength: 1, MaxWait: 5 * time.Second}, func(d *api.Deps) {
		ready := d.Ready
		d.Ready = func(ctx context.Context) error {
			if down.Load() {
				return errors.New("the database does not answer")
			}
			return ready(ctx)
		}
	})
	ids := []uuid.UUID{b.seedSavedSearch(seedOpts{}).ID, b.seedSavedSearch(seedOpts{}).ID}
	unlock := b.lockRows(t, ids...)
	held := []<-chan timedResponse{b.patchAsync(ids[0], nil), b.patchAsync(ids[1], nil)}
	b.waitForLockWaiters(t, 2)
	down.Store(true)
	waiting := b.sendAsync(req{method: http.MethodGet, path: "/v1/runs"})
	b.waitForQueue(t, "one request waiting", func(st seatq.Stats) bool { return st.Queued == 1 })
	if res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches"}); res.status != http.StatusTooManyRequests ||
		res.problem(t).Code != api.CodeRateLimited {
		t.Errorf("a request beyond the queue = %d %s, want its 429 rate_limited", res.status, res.body)
	}
	r := <-waiting
	if r.err != nil {
		t.Fatal(r.err)
	}
	p := r.res.problem(t)
	if secs, err := strconv.Atoi(r.res.header.Get("Retry-After")); r.res.status != http.StatusServiceUnavailable ||
		p.Code != api.CodeUnavailable || err != nil || secs < 1 || !strings.Contains(p.Detail, "cannot reach its database") {
		t.Errorf("a request past the longest wait while the database does not answer = %d %s Retry-After %q, "+
			"want 503 unavailable with Retry-After", r.res.status, r.res.body, r.res.header.Get("Retry-After"))
	}
	down.Store(false)
	unlock()
	b.wantServed(t, held)
}

// TestAWaitingRequestTouchesNoConnectionAndLeavesWhenItsClientGoes: a
// request waiting for a seat has taken no connection of the pool; when
// its client goes away it leaves the queue at once, is counted as
// abandoned, and afterwards every seat comes back.
func TestAWaitingRequestTouchesNoConnectionAndLeavesWhenItsClientGoes(t *testing.T) {
	t.Parallel()
	b := fairSetup(t, 2, seatq.Config{})
	ids := []uuid.UUID{b.seedSavedSearch(seedOpts{}).ID, b.seedSavedSearch(seedOpts{}).ID}
	unlock := b.lockRows(t, ids...)
	held := []<-chan timedResponse{b.patchAsync(ids[0], nil), b.patchAsync(ids[1], nil)}
	b.waitForLockWaiters(t, 2)
	acquires := b.pool.Stat().AcquireCount()
	ctx, cancel := context.WithCancel(context.Background())
	gone := b.sendAsync(req{method: http.MethodPost, path: "/v1/saved-searches", ctx: ctx,
		body: map[string]any{"name": "never", "brief": map[string]any{"query": "q"}}})
	b.waitForQueue(t, "the request waiting", func(st seatq.Stats) bool { return st.Queued == 1 })
	time.Sleep(100 * time.Millisecond)
	if n := b.pool.Stat().AcquireCount(); n != acquires {
		t.Errorf("the waiting request took %d connections of the pool, want none before its seat", n-acquires)
	}
	cancel()
	if r := <-gone; r.err == nil {
		t.Errorf("the cancelled request answered %d", r.res.status)
	}
	b.waitForQueue(t, "the cancelled request gone from the queue", func(st seatq.Stats) bool {
		return st.Queued == 0 && st.InUse == 2 && st.FlowsTotal == 1
	})
	unlock()
	b.wantServed(t, held)
	// The cancelled create wrote nothing.
	b.wantCount(t, 0, `SELECT count(*) FROM agent.saved_searches WHERE name = 'never'`)
	body := string(b.do(req{method: http.MethodGet, path: "/metrics", noAuth: true}).body)
	if !strings.Contains(body, `searchd_admission_abandoned_total{kind="organization"} 1`+"\n") {
		t.Errorf("metrics lack the abandoned request:\n%s", grepLines(body, "searchd_admission"))
	}
}

// TestCallbacksAreChargedToTheirProviderAndForgedOnesTakeNoSeat: with the
// one seat held, a forged callback is refused 401 at once (it never waits
// for a seat, so a flood of them takes none), while a signed one waits in
// its provider's flow and is accepted when the seat frees.
func TestCallbacksAreChargedToTheirProviderAndForgedOnesTakeNoSeat(t *testing.T) {
	t.Parallel()
	b := fairSetup(t, 1, seatq.Config{})
	job := b.seedJob("job-" + uuid.NewString()[:8])
	ss := b.seedSavedSearch(seedOpts{})
	unlock := b.lockRows(t, ss.ID)
	held := b.patchAsync(ss.ID, nil)
	b.waitForLockWaiters(t, 1)
	body := callbackBody(job.ProviderJobID, "running", nil)
	for i := range 20 {
		forged := b.callbackReq(delivery{jobID: pathOf(job), deliveryID: "forged-" + strconv.Itoa(i), body: body,
			signature: "v1," + strings.Repeat("A", 43) + "="})
		began := time.Now()
		if res := b.do(forged); res.status != http.StatusUnauthorized || time.Since(began) > 5*time.Second {
			t.Fatalf("a forged callback with every seat taken = %d after %s, want 401 at once", res.status, time.Since(began))
		}
	}
	genuine := b.sendAsync(b.callbackReq(delivery{jobID: pathOf(job), deliveryID: "genuine", body: body}))
	st := b.waitForQueue(t, "the signed callback waiting", func(st seatq.Stats) bool { return st.Queued == 1 })
	if f := flowOf(st, seatq.KindProvider, acme); f.Waiting != 1 {
		t.Errorf("queue %+v, want the callback waiting in provider %s's flow", st, acme)
	}
	unlock()
	if r := <-held; r.err != nil || r.res.status != http.StatusOK {
		t.Errorf("held PATCH = %+v %v, want 200", r.res, r.err)
	}
	r := <-genuine
	if r.err != nil {
		t.Fatal(r.err)
	}
	if status, _ := r.res.answer(t); status != "accepted" {
		t.Errorf("the signed callback = %s, want accepted", status)
	}
}

// TestAStartWaitingWithPreferWaitHoldsNoSeat: on a server of one seat, a
// start of a key another worker holds waits with Prefer: wait; while it
// waits it holds no seat, so another organization's request is served
// while the start still waits (were the seat held, that request would
// wait for the start's answer). The start then answers 409 in_progress
// when its wait runs out, and every seat is back.
func TestAStartWaitingWithPreferWaitHoldsNoSeat(t *testing.T) {
	t.Parallel()
	b := waitSetup(t, 1)
	ss := b.seedSavedSearch(seedOpts{})
	b.holdClaim(t, ss.ID, "held", time.Minute)
	waiter := b.startAsync(ss.ID, "held", "wait=8")
	deadline := time.Now().Add(8 * time.Second)
	for {
		var waited bool
		err := b.admin.QueryRow(context.Background(), `SELECT waited FROM agent.idempotency_keys WHERE key = 'held'`).Scan(&waited)
		if err == nil && waited && b.admission.Stats(0).InUse == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the start never waited without its seat (waited %v, queue %+v)", waited, b.admission.Stats(10))
		}
		time.Sleep(10 * time.Millisecond)
	}
	res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches", header: bearer(b.tokenFor(uuid.New(), "other"))})
	select {
	case w := <-waiter:
		t.Fatalf("the waiting start answered %+v before another organization's request was served", w.res)
	default:
	}
	if res.status != http.StatusOK {
		t.Errorf("another organization while the start waits = %d %s, want 200", res.status, res.body)
	}
	w := <-waiter
	if w.err != nil || w.res.status != http.StatusConflict || w.res.problem(t).Code != api.CodeInProgress {
		t.Errorf("the waiter = %+v %v, want 409 in_progress when its wait ran out", w.res, w.err)
	}
	if st := b.admission.Stats(10); st.InUse != 0 || st.FlowsTotal != 0 {
		t.Errorf("afterwards: %+v, want every seat back", st)
	}
}

// TestASlowClientHoldsNoSeat runs issue 36's seat-holding attacks of one
// organization against a server of two seats, each from two connections,
// and checks that none holds a seat while the client is slow (the queue's
// seats in use stay 0) and that another organization is served at once:
//   - a chunked PUT of a baseline that sends 20 KB, then stops (it held
//     8 seats until the read timeout);
//   - a PUT declaring Content-Length: 600000 that sends 1,000 bytes;
//   - eight pipelined GETs of the organization's 1 MiB saved search from
//     a client that never reads.
//
// A body that does not arrive within the body timeout (here 2 s) answers
// 503 and gives its share of the body budget back.
func TestASlowClientHoldsNoSeat(t *testing.T) {
	t.Parallel()
	b := fairSetup(t, 2, seatq.Config{}, func(d *api.Deps) { d.BodyTimeout = 2 * time.Second })
	items := make([]string, 0, 5000)
	for i := range cap(items) {
		items = append(items, fmt.Sprintf("item-%0195d", i))
	}
	own := b.seedSavedSearch(seedOpts{items: items}) // about 1 MiB of baseline
	other := uuid.New()
	otherAuth := "Bearer " + b.tokenFor(other, "light")
	theirs := b.seedSavedSearch(seedOpts{org: other})
	addr := strings.TrimPrefix(b.server.URL, "http://")
	auth := "Authorization: Bearer " + b.token + "\r\n"
	baseline := "/v1/saved-searches/" + own.ID.String() + "/baseline"
	attacks := []struct {
		name  string
		write func(conn net.Conn) error
	}{
		{"a chunked body that stops after 20 KB", func(conn net.Conn) error {
			chunk := strings.Repeat("x", 20_000)
			_, err := fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\n"+
				"Transfer-Encoding: chunked\r\n\r\n%x\r\n{\"items\":[\"%s\r\n", baseline, auth, len(chunk)+11, chunk)
			return err
		}},
		{"a body declared 600000 bytes that stops after 1000", func(conn net.Conn) error {
			_, err := fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\n"+
				"Content-Length: 600000\r\n\r\n{\"items\":[\"%s", baseline, auth, strings.Repeat("x", 988))
			return err
		}},
		{"eight pipelined GETs of 1 MiB never read", func(conn net.Conn) error {
			var w strings.Builder
			for range 8 {
				fmt.Fprintf(&w, "GET /v1/saved-searches/%s HTTP/1.1\r\nHost: x\r\n%s\r\n", own.ID, auth)
			}
			_, err := io.WriteString(conn, w.String())
			return err
		}},
	}
	for _, a := range attacks {
		var conns []net.Conn
		for range 2 {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := a.write(conn); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, conn)
		}
		// Once the server has done what it can (read what was sent,
		// rendered what the buffers take), no seat is in use, and none
		// comes to be.
		if !pgtest.Holds(func() bool { return b.admission.Stats(1).InUse == 0 }, 2*time.Second, time.Minute) {
			t.Errorf("%s: seats in use while the client is slow (%+v), want none", a.name, b.admission.Stats(10))
		}
		start := time.Now()
		res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches/" + theirs.ID.String(), token: strings.TrimPrefix(otherAuth, "Bearer ")})
		if res.status != http.StatusOK || time.Since(start) > 5*time.Second {
			t.Errorf("%s: another organization's read = %d after %s, want 200 at once", a.name, res.status, time.Since(start))
		}
		if strings.Contains(a.name, "body") {
			// The body timeout ends the slow upload with a 503.
			for _, conn := range conns {
				_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				r, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil || r.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("%s: the slow upload's answer = %v, %v; want 503", a.name, r, err)
				}
			}
		}
		for _, conn := range conns {
			conn.Close()
		}
	}
	b.waitForQueue(t, "every seat back", func(st seatq.Stats) bool { return st.InUse == 0 })
}

// TestALargeAnswerIsChargedToTheOrganizationsNextRequest: a read whose
// answer is over 448 KiB took one seat and cost eight; while the
// organization is being served (a request of it holds a seat), its next
// request takes the seven it owes on top of its own, and another
// organization's takes one (issue 36: 64 clients reading such answers
// held every seat as if each were a start).
func TestALargeAnswerIsChargedToTheOrganizationsNextRequest(t *testing.T) {
	t.Parallel()
	b := fairSetup(t, 16, seatq.Config{})
	items := make([]string, 0, 3000)
	for i := range cap(items) {
		items = append(items, fmt.Sprintf("item-%0195d", i))
	}
	own := b.seedSavedSearch(seedOpts{items: items}) // about 600 KB of baseline
	flow := func(org uuid.UUID) seatq.Flow { return seatq.Flow{Kind: seatq.KindOrganization, Name: org.String()} }
	keep, err := b.admission.Acquire(t.Context(), flow(b.org), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Release()
	res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches/" + own.ID.String()})
	if res.status != http.StatusOK || len(res.body) < 448<<10 {
		t.Fatalf("GET the saved search = %d with %d bytes, want 200 with over 448 KiB", res.status, len(res.body))
	}
	next, err := b.admission.Acquire(t.Context(), flow(b.org), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release()
	if next.Width() != seatq.MaxWidth {
		t.Errorf("the organization's next request takes %d seats, want %d: 1 and the 7 its large answer owed", next.Width(), seatq.MaxWidth)
	}
	other, err := b.admission.Acquire(t.Context(), flow(uuid.New()), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if other.Width() != 1 {
		t.Errorf("another organization's request takes %d seats, want 1", other.Width())
	}
}
