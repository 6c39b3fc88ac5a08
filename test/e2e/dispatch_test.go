//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/client"
)

// The dispatch scenarios: every admitted Run reaches the runtime, and
// whatever breaks on the way (the runtime, a replica), none is lost, none
// is stuck, and none is handed over as two different things. The runtime
// is an HTTP server in this test that verifies every delivery's signature
// and records it; it misbehaves on command.
//
// The replicas dispatch with SEARCHD_RUNTIME_TIMEOUT=2s (so a lease of
// 7 s) and SEARCHD_DISPATCH_MAX_BACKOFF=2s instead of 10 s and 5 min: a
// timeout, a lease and the longest backoff then each take seconds, and the
// scenarios a minute; the rules they exercise are the product's.
const (
	dispatchTimeout    = 2 * time.Second
	dispatchMaxBackoff = 2 * time.Second
	// dispatchLease is outbound.LeaseFor(dispatchTimeout).
	dispatchLease = dispatchTimeout + 5*time.Second
)

// runtimeKey is the test runtime's signing key.
var runtimeKey = []byte("e2e-runtime-signing-key-32-bytes")

// Runtime behaviours.
const (
	rtHealthy int32 = iota // answer 202 at once
	rtChaos                // 500, a timeout, a cut connection or 202, at random
	rtHold                 // hold every delivery until released, then 202
)

// testRuntime is the runtime of the dispatch scenarios.
type testRuntime struct {
	t    *testing.T
	url  string
	srv  *http.Server
	wh   *standardwebhooks.Webhook
	mode atomic.Int32
	held atomic.Int64

	mu sync.Mutex
	// release ends the current hold.
	release chan struct{}
	// bodies maps a Run id to the hashes of the bodies it came with and
	// how often; org the organization the body names.
	bodies     map[string]map[string]int
	org        map[string]string
	answers    map[string]int
	unverified int
	// mismatched counts deliveries whose webhook-id is not the Run id of
	// their body.
	mismatched int
	deliveries int
}

func newTestRuntime(t *testing.T) *testRuntime {
	t.Helper()
	wh, err := standardwebhooks.NewWebhookRaw(runtimeKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt := &testRuntime{t: t, wh: wh, url: "http://" + ln.Addr().String() + "/runs", release: make(chan struct{}),
		bodies: map[string]map[string]int{}, org: map[string]string{}, answers: map[string]int{}}
	rt.srv = &http.Server{Handler: http.HandlerFunc(rt.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rt.srv.Serve(ln) }()
	t.Cleanup(func() {
		rt.releaseHeld()
		_ = rt.srv.Close()
	})
	return rt
}

func (rt *testRuntime) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var msg struct {
		Data struct {
			Run struct {
				ID             string `json:"id"`
				OrganizationID string `json:"organization_id"`
			} `json:"run"`
		} `json:"data"`
	}
	verr := rt.wh.Verify(body, r.Header)
	_ = json.Unmarshal(body, &msg)
	id := msg.Data.Run.ID
	sum := sha256.Sum256(body)
	rt.mu.Lock()
	rt.deliveries++
	switch {
	case verr != nil:
		rt.unverified++
	case r.Header.Get("webhook-id") != id || id == "":
		rt.mismatched++
	default:
		if rt.bodies[id] == nil {
			rt.bodies[id] = map[string]int{}
		}
		rt.bodies[id][hex.EncodeToString(sum[:])]++
		rt.org[id] = msg.Data.Run.OrganizationID
	}
	release := rt.release
	rt.mu.Unlock()
	if verr != nil {
		rt.answer(w, "401", http.StatusUnauthorized)
		return
	}
	switch rt.mode.Load() {
	case rtHold:
		rt.held.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		rt.answer(w, "202 after a hold", http.StatusAccepted)
	case rtChaos:
		switch p := rand.Float64(); {
		case p < 0.25:
			rt.answer(w, "500", http.StatusInternalServerError)
		case p < 0.40:
			// Longer than the replicas' timeout: they give up first.
			select {
			case <-time.After(dispatchTimeout + time.Second):
			case <-r.Context().Done():
			}
			rt.answer(w, "timeout", http.StatusAccepted)
		case p < 0.55:
			// Received whole, and the connection cut before any answer.
			rt.count("cut")
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0)
				}
				_ = conn.Close()
			}
		default:
			rt.answer(w, "202", http.StatusAccepted)
		}
	default:
		rt.answer(w, "202", http.StatusAccepted)
	}
}

func (rt *testRuntime) answer(w http.ResponseWriter, what string, status int) {
	rt.count(what)
	w.WriteHeader(status)
}

func (rt *testRuntime) count(what string) {
	rt.mu.Lock()
	rt.answers[what]++
	rt.mu.Unlock()
}

// hold makes every delivery wait until releaseHeld.
func (rt *testRuntime) hold() {
	rt.mu.Lock()
	rt.release = make(chan struct{})
	rt.mu.Unlock()
	rt.held.Store(0)
	rt.mode.Store(rtHold)
}

// releaseHeld answers every held delivery and makes the runtime healthy.
func (rt *testRuntime) releaseHeld() {
	rt.mode.Store(rtHealthy)
	rt.mu.Lock()
	select {
	case <-rt.release:
	default:
		close(rt.release)
	}
	rt.mu.Unlock()
}

// received returns, for org, each Run id the runtime received and how
// often; and the ids that came with more than one body.
func (rt *testRuntime) received(org string) (counts map[string]int, twoBodies []string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	counts = map[string]int{}
	for id, hashes := range rt.bodies {
		if rt.org[id] != org {
			continue
		}
		for _, n := range hashes {
			counts[id] += n
		}
		if len(hashes) > 1 {
			twoBodies = append(twoBodies, id)
		}
	}
	return counts, twoBodies
}

// dispatchEnv are the settings a replica dispatches to rt with.
func dispatchEnv(rt *testRuntime) []string {
	return []string{
		"SEARCHD_RUNTIME_URL=" + rt.url,
		"SEARCHD_RUNTIME_SECRET=whsec_" + base64.StdEncoding.EncodeToString(runtimeKey),
		"SEARCHD_RUNTIME_TIMEOUT=" + dispatchTimeout.String(),
		"SEARCHD_DISPATCH_MAX_BACKOFF=" + dispatchMaxBackoff.String(),
	}
}

// dispatchRig is the harness with the replicas' base settings and the
// runtime.
type dispatchRig struct {
	h    *harness
	rt   *testRuntime
	base map[*replica][]string
}

// restart restarts r (killing it first, if it runs), dispatching to the
// runtime when on, with dispatch off otherwise.
func (g *dispatchRig) restart(t *testing.T, r *replica, on bool) {
	t.Helper()
	r.Kill()
	r.env = slices.Clone(g.base[r])
	if on {
		r.env = append(r.env, dispatchEnv(g.rt)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDispatch runs the dispatch scenarios against one set of processes,
// each scenario with an organization of its own.
func TestDispatch(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	h := setup(t, cfg)
	g := &dispatchRig{h: h, rt: newTestRuntime(t), base: map[*replica][]string{}}
	t.Logf("the replicas dispatch with SEARCHD_RUNTIME_TIMEOUT=%s (a lease of %s) and SEARCHD_DISPATCH_MAX_BACKOFF=%s "+
		"instead of 10s and 5m, so that a timeout, a lease and the longest backoff each take seconds",
		dispatchTimeout, dispatchLease, dispatchMaxBackoff)
	for _, r := range h.replicas {
		g.base[r] = slices.Clone(r.env)
		g.restart(t, r, true)
	}
	if !t.Run("ChecksCatchPlantedViolations", func(t *testing.T) { testDispatchChecks(t, g) }) {
		t.FailNow()
	}
	var summaries []string
	for _, sc := range []struct {
		name string
		run  func(t *testing.T, g *dispatchRig) string
	}{
		{"ThousandStartsAcrossThreeReplicasWithAMisbehavingRuntime", testThousandStarts},
		{"ReplicaKilledMidDelivery", testKilledMidDelivery},
		{"ReplicaStoppedPastItsLease", testStoppedPastLease},
	} {
		t.Run(sc.name, func(t *testing.T) {
			defer func() {
				g.rt.releaseHeld()
				for _, r := range h.replicas {
					_ = r.Signal(syscall.SIGCONT)
					g.restart(t, r, true)
				}
			}()
			summaries = append(summaries, sc.run(t, g))
		})
	}
	for _, s := range summaries {
		t.Log(s)
	}
}

// orgToken returns a fresh organization and a token of it.
func orgToken(t *testing.T) (uuid.UUID, string) {
	t.Helper()
	org := uuid.New()
	tok, err := auth.SignToken([]byte(jwtSecret), org, "e2e-dispatch", time.Now(), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return org, tok
}

// dispatchState counts org's dispatches by state, and its Runs by status.
func (g *dispatchRig) dispatchState(ctx context.Context, org uuid.UUID) (states, statuses map[string]int, err error) {
	states, statuses = map[string]int{}, map[string]int{}
	rows, err := g.h.db.Query(ctx, `SELECT d.state, r.status FROM agent.runs r
		LEFT JOIN agent.run_dispatches d ON d.run_id = r.id AND d.organization_id = r.organization_id
		WHERE r.organization_id = $1`, org)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var state *string
		var status string
		if err := rows.Scan(&state, &status); err != nil {
			return nil, nil, err
		}
		if state == nil {
			states["none"]++
		} else {
			states[*state]++
		}
		statuses[status]++
	}
	return states, statuses, rows.Err()
}

// waitDelivered waits until org has no pending dispatch, or deadline.
func (g *dispatchRig) waitDelivered(t *testing.T, org uuid.UUID, deadline time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		states, _, err := g.dispatchState(context.Background(), org)
		if err == nil && states["pending"] == 0 {
			return time.Since(began)
		}
		if time.Since(began) > deadline {
			t.Errorf("after %s, dispatches %v: some are still pending", deadline, states)
			return time.Since(began)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkDelivered is the verdict of a scenario: every admitted Run of org
// is dispatched and the runtime received it, the runtime received no Run
// that was not admitted, none with two bodies, and every delivery verified
// and carried its Run id as webhook-id. It returns the problems, and the
// runtime's counts.
func (g *dispatchRig) checkDelivered(ctx context.Context, org uuid.UUID) (problems []string, counts map[string]int) {
	rows, err := g.h.db.Query(ctx, `SELECT r.id::text, r.status, coalesce(d.state, 'none')
		FROM agent.runs r LEFT JOIN agent.run_dispatches d ON d.run_id = r.id AND d.organization_id = r.organization_id
		WHERE r.organization_id = $1`, org)
	if err != nil {
		return []string{err.Error()}, nil
	}
	admitted := map[string]bool{}
	notDispatched := 0
	for rows.Next() {
		var id, status, state string
		if err := rows.Scan(&id, &status, &state); err != nil {
			rows.Close()
			return []string{err.Error()}, nil
		}
		admitted[id] = true
		if state != "dispatched" || status != "dispatched" {
			notDispatched++
			if notDispatched <= 3 {
				problems = append(problems, fmt.Sprintf("Run %s is %s with its dispatch %s, want both dispatched", id, status, state))
			}
		}
	}
	rows.Close()
	if notDispatched > 3 {
		problems = append(problems, fmt.Sprintf("... %d Runs in all are not dispatched", notDispatched))
	}
	counts, twoBodies := g.rt.received(org.String())
	missing := 0
	for id := range admitted {
		if counts[id] == 0 {
			missing++
			if missing <= 3 {
				problems = append(problems, fmt.Sprintf("admitted Run %s never reached the runtime", id))
			}
		}
	}
	for id := range counts {
		if !admitted[id] {
			problems = append(problems, fmt.Sprintf("the runtime received Run %s, which was not admitted", id))
		}
	}
	for _, id := range twoBodies {
		problems = append(problems, fmt.Sprintf("Run %s reached the runtime as two different bodies", id))
	}
	g.rt.mu.Lock()
	if g.rt.unverified > 0 || g.rt.mismatched > 0 {
		problems = append(problems, fmt.Sprintf("%d deliveries did not verify and %d carried a webhook-id other than their Run id",
			g.rt.unverified, g.rt.mismatched))
	}
	g.rt.mu.Unlock()
	return problems, counts
}

// testDispatchChecks proves the verdict can fail: a Run the runtime never
// received, one received with a second body, and a delivery under the
// wrong webhook-id are each reported.
func testDispatchChecks(t *testing.T, g *dispatchRig) {
	ctx := context.Background()
	org := uuid.New()
	never, twice := uuid.New(), uuid.New()
	for _, id := range []uuid.UUID{never, twice} {
		if _, err := g.h.db.Exec(ctx, `WITH r AS (
				INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, name, status, created_at, retain_until)
				VALUES ($1::uuid, $2::uuid, 'capability', 'direct:' || $1::text, 'h', 'planted', 'dispatched', now(), now() + interval '1 day')
				RETURNING id)
			INSERT INTO agent.run_dispatches (run_id, organization_id, state, next_attempt_at, created_at, dispatched_at)
			SELECT id, $2, 'dispatched', now(), now(), now() FROM r`, id, org); err != nil {
			t.Fatal(err)
		}
	}
	g.rt.mu.Lock()
	g.rt.bodies[twice.String()] = map[string]int{"one": 1, "two": 1}
	g.rt.org[twice.String()] = org.String()
	g.rt.mismatched++
	g.rt.mu.Unlock()
	problems, _ := g.checkDelivered(ctx, org)
	g.rt.mu.Lock()
	delete(g.rt.bodies, twice.String())
	g.rt.mismatched--
	g.rt.mu.Unlock()
	joined := strings.Join(problems, "\n")
	for _, want := range []string{never.String() + " never reached the runtime", twice.String() + " reached the runtime as two different bodies",
		"carried a webhook-id other than their Run id"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the verdict misses a planted violation (%q):\n%s", want, joined)
		}
	}
}

// testThousandStarts: 1,000 starts (a fifth of them saved-search starts,
// a tenth repeated as a replay) over the three replicas, while the runtime
// answers 500, times out and cuts connections at random, and then
// recovers. Every admitted Run must be delivered, as one body under its
// own id however often it was sent.
func testThousandStarts(t *testing.T, g *dispatchRig) string {
	const starts = 1000
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	org, tok := orgToken(t)
	rec := &recorder{}
	admin, err := newClient("setup", tok, g.h.replicas, 0, loadPolicy, rec)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := admin.CreateSavedSearch(ctx, client.CreateSavedSearchParams{Name: "dispatched", Brief: client.Brief{Query: "q"},
		Baseline: &client.BaselineInput{Items: []string{"https://example.com/1"}}})
	if err != nil {
		t.Fatal(err)
	}
	g.rt.mode.Store(rtChaos)
	began := time.Now()
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex
		runOf   = map[string]string{}
		replays atomic.Int64
	)
	for w := range 24 {
		c, err := newClient(fmt.Sprintf("w%d", w), tok, g.h.replicas, w%3, loadPolicy, rec)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= starts || ctx.Err() != nil {
					return
				}
				key := fmt.Sprintf("dispatch-%d", i)
				start := func() (*client.StartResult, error) {
					if i%5 == 0 {
						return c.StartSavedSearch(ctx, ss.ID, client.StartOptions{MaxResults: i%50 + 1}, client.WithIdempotencyKey(key))
					}
					return c.StartRun(ctx, client.DirectStart{Kind: "capability", Name: "enrich", Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))},
						client.WithIdempotencyKey(key))
				}
				res, err := start()
				if err != nil {
					t.Errorf("start %s: %v", key, err)
					continue
				}
				if i%10 == 0 {
					again, err := start()
					if err != nil || again.Run.ID != res.Run.ID || again.Created {
						t.Errorf("replay of %s = %+v, %v; want Run %s replayed", key, again, err, res.Run.ID)
					}
					replays.Add(1)
				}
				mu.Lock()
				runOf[key] = res.Run.ID
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	startsTook := time.Since(began)
	// The runtime misbehaves a little longer, then recovers.
	time.Sleep(3 * time.Second)
	g.rt.mode.Store(rtHealthy)
	drain := g.waitDelivered(t, org, 2*time.Minute)

	distinct := map[string]bool{}
	for _, id := range runOf {
		distinct[id] = true
	}
	if len(runOf) != starts || len(distinct) != starts {
		t.Errorf("%d keys answered with %d distinct Runs, want %d and %d", len(runOf), len(distinct), starts, starts)
	}
	problems, counts := g.checkDelivered(ctx, org)
	for _, p := range problems {
		t.Error(p)
	}
	deliveries, redelivered := 0, 0
	for _, n := range counts {
		deliveries += n
		if n > 1 {
			redelivered++
		}
	}
	var attempts, cut int
	if err := g.h.db.QueryRow(ctx, `SELECT coalesce(sum(d.attempts), 0),
		(SELECT count(*) FROM agent.run_dispatch_attempts a WHERE a.organization_id = $1 AND a.outcome = 'in_flight')
		FROM agent.run_dispatches d WHERE d.organization_id = $1`, org).Scan(&attempts, &cut); err != nil {
		t.Fatal(err)
	}
	if redelivered == 0 {
		t.Errorf("no Run was delivered twice: the runtime's misbehaviour was not felt")
	}
	g.rt.mu.Lock()
	answers := fmt.Sprint(g.rt.answers)
	g.rt.mu.Unlock()
	return fmt.Sprintf("dispatch: %d starts (%d replayed) in %s over 3 replicas; all %d Runs delivered %s after the runtime recovered; "+
		"%d deliveries received (%d Runs more than once, each time the same body and id), %d attempts recorded; runtime answers so far %s",
		starts, replays.Load(), startsTook.Round(time.Millisecond), len(counts), drain.Round(time.Millisecond), deliveries, redelivered, attempts, answers)
}

// startMany starts n direct Runs of the organization of tok through the
// replicas in targets.
func startMany(ctx context.Context, t *testing.T, tok string, targets []*replica, prefix string, n int) {
	t.Helper()
	c, err := newClient(prefix, tok, targets, 0, loadPolicy, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := c.StartRun(ctx, client.DirectStart{Kind: "capability", Name: "enrich"},
				client.WithIdempotencyKey(fmt.Sprintf("%s-%d", prefix, i))); err != nil {
				t.Errorf("start %d: %v", i, err)
			}
		})
	}
	wg.Wait()
}

// holdOnOne makes r1 the only dispatcher, starts n Runs through r2 and r3,
// and waits until the runtime holds at least want of r1's deliveries. It
// returns the organization.
func (g *dispatchRig) holdOnOne(ctx context.Context, t *testing.T, n int, want int64) uuid.UUID {
	t.Helper()
	r1, r2, r3 := g.h.replicas[0], g.h.replicas[1], g.h.replicas[2]
	g.restart(t, r2, false)
	g.restart(t, r3, false)
	g.rt.hold()
	org, tok := orgToken(t)
	startMany(ctx, t, tok, []*replica{r2, r3}, "held", n)
	deadline := time.Now().Add(30 * time.Second)
	for g.rt.held.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the runtime holds %d deliveries of %s after 30 s, want %d", g.rt.held.Load(), r1.name, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return org
}

// heldTwice counts the Runs of org the runtime received more than once.
func (g *dispatchRig) heldTwice(org uuid.UUID) int {
	counts, _ := g.rt.received(org.String())
	n := 0
	for _, c := range counts {
		if c > 1 {
			n++
		}
	}
	return n
}

// testKilledMidDelivery: r1, the only dispatcher, has deliveries in flight
// (the runtime received them and holds its answers) when it is killed with
// kill -9. Its dispatches are taken over by r2 once their lease passes, and
// delivered again under the same id with the same body.
func testKilledMidDelivery(t *testing.T, g *dispatchRig) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r1, r2 := g.h.replicas[0], g.h.replicas[1]
	org := g.holdOnOne(ctx, t, 40, 8)
	r1.Kill()
	killed := time.Now()
	held := g.rt.held.Load()
	g.rt.releaseHeld()
	g.restart(t, r2, true)
	drain := g.waitDelivered(t, org, time.Minute)
	problems, _ := g.checkDelivered(ctx, org)
	for _, p := range problems {
		t.Error(p)
	}
	again := g.heldTwice(org)
	if int64(again) < held {
		t.Errorf("%d Runs were delivered again, want at least the %d r1 held when it died", again, held)
	}
	var cutShort int
	if err := g.h.db.QueryRow(ctx, `SELECT count(*) FROM agent.run_dispatch_attempts
		WHERE organization_id = $1 AND outcome = 'in_flight'`, org).Scan(&cutShort); err != nil {
		t.Fatal(err)
	}
	if int64(cutShort) < held {
		t.Errorf("%d attempts are left in flight (cut short), want at least the %d r1 held", cutShort, held)
	}
	return fmt.Sprintf("dispatch, %s killed with %d deliveries in flight: all delivered %s after the kill (lease %s), "+
		"%d Runs delivered twice with one body each, %d attempts left cut short, none stuck",
		r1.name, held, time.Since(killed).Round(time.Millisecond), dispatchLease, again, cutShort) + drainNote(drain)
}

func drainNote(d time.Duration) string {
	return fmt.Sprintf(" (drained in %s)", d.Round(time.Millisecond))
}

// testStoppedPastLease: r1, the only dispatcher, is stopped (SIGSTOP) with
// deliveries in flight, and stays stopped past their lease while r2 takes
// them over and delivers them. When r1 continues, it gets its answers, and
// its fence (the attempt number it leased) is gone: it changes nothing.
func testStoppedPastLease(t *testing.T, g *dispatchRig) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r1, r2 := g.h.replicas[0], g.h.replicas[1]
	org := g.holdOnOne(ctx, t, 40, 8)
	// Stopped for certain before the runtime answers (replica.Stop waits
	// for the kernel to say so): a signal takes effect only when the
	// process is next scheduled, and a busy machine let it run on.
	if err := r1.Stop(); err != nil {
		t.Fatal(err)
	}
	held := g.rt.held.Load()
	// The runtime answers what r1 sent; r1 is stopped and reads nothing.
	g.rt.releaseHeld()
	g.restart(t, r2, true)
	drain := g.waitDelivered(t, org, time.Minute)
	// The lease held: no Run's second attempt (r2's) began before its
	// first (r1's) had held it a whole lease. Both times are the
	// database's, when each attempt leased the row, so a busy machine's
	// delays between the lease, the stop and the harness's clock do not
	// enter (timed from the stop, a loaded run saw 5.4 s of a 7 s lease:
	// r1 had leased them long before it was stopped).
	var minGap float64 // seconds
	if err := g.h.db.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM min(a2.started_at - a1.started_at)), 1e9)::float8
		FROM agent.run_dispatch_attempts a1
		JOIN agent.run_dispatch_attempts a2 ON a2.run_id = a1.run_id AND a2.organization_id = a1.organization_id AND a2.attempt = 2
		WHERE a1.organization_id = $1 AND a1.attempt = 1`, org).Scan(&minGap); err != nil {
		t.Fatal(err)
	}
	if gap := time.Duration(minGap * float64(time.Second)); gap < dispatchLease {
		t.Errorf("a Run's second attempt began %s after its first, within r1's %s lease: the lease did not hold", gap, dispatchLease)
	}
	if err := r1.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// r1 wakes up, reads its answers (or times out) and tries to end its
	// attempts under fences that moved on: each is recorded on its own
	// attempt and moves nothing.
	var lateAnswers int
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := g.h.db.QueryRow(ctx, `SELECT count(*) FROM agent.run_dispatch_attempts a
			JOIN agent.run_dispatches d ON d.run_id = a.run_id AND d.organization_id = a.organization_id
			WHERE a.organization_id = $1 AND a.attempt = 1 AND d.attempts >= 2 AND a.outcome <> 'in_flight'`, org).Scan(&lateAnswers); err != nil {
			t.Fatal(err)
		}
		if int64(lateAnswers) >= held || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if int64(lateAnswers) < held {
		t.Errorf("r1 recorded %d answers of the %d deliveries it held: it did not wake up and try to end them", lateAnswers, held)
	}
	problems, _ := g.checkDelivered(ctx, org)
	for _, p := range problems {
		t.Error(p)
	}
	var changes, runs int
	if err := g.h.db.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM agent.run_status_changes WHERE organization_id = $1),
		(SELECT count(*) FROM agent.runs WHERE organization_id = $1 AND version = 2)`,
		org).Scan(&changes, &runs); err != nil {
		t.Fatal(err)
	}
	if changes != 40 || runs != 40 {
		t.Errorf("%d status changes and %d Runs at version 2, want 40 and 40: each Run dispatched once, whoever answered", changes, runs)
	}
	again := g.heldTwice(org)
	if int64(again) < held {
		t.Errorf("%d Runs were delivered again, want at least the %d r1 held when it stopped", again, held)
	}
	if r1.State() == "T" {
		t.Error("r1 is still stopped")
	}
	return fmt.Sprintf("dispatch, %s stopped past its lease with %d deliveries in flight: all delivered by %s%s, %d twice with one body; "+
		"after SIGCONT, %d of r1's late answers recorded on their own attempts and none moved a dispatch (40 status changes, 40 Runs at version 2)",
		r1.name, held, r2.name, drainNote(drain), again, lateAnswers)
}
