package api_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/seatqtest"
	"github.com/searchd/searchd/providerjobs"
)

// waitBundle is a server that honours Prefer: wait, on a pool of its own
// with a known size, beside the test's own pool for locks and counts.
type waitBundle struct {
	*bundle
	// admin is the test's pool, separate from the server's, so its
	// connections are known when the server's are counted.
	admin    *pgxpool.Pool
	maxConns int32
}

// waitSetup starts a server whose starter waits (a running hub, the
// default 30 s maximum) on a pool of maxConns connections.
func waitSetup(t *testing.T, maxConns int32, change ...func(*api.Deps)) *waitBundle {
	t.Helper()
	admin := pgtest.NewDB(t)
	cfg := admin.Config()
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	hub := idempotency.NewHub(cfg.ConnConfig, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	b := setup(t, setupOpts{pool: pool, deps: func(d *api.Deps) {
		d.Starter = newStores(pool, nil).starter(t, admission.Config{Hub: hub})
		d.MaxPreferWait = api.PreferWaitLimit
		for _, f := range change {
			f(d)
		}
	}})
	return &waitBundle{bundle: b, admin: admin, maxConns: maxConns}
}

// startPrefer sends a start of ss with key and, unless empty, a Prefer
// header; it is safe on any goroutine.
func (b *bundle) startPrefer(id uuid.UUID, key, prefer string) (*response, error) {
	h := map[string]string{"Idempotency-Key": key}
	if prefer != "" {
		h["Prefer"] = prefer
	}
	return b.send(req{method: http.MethodPost, path: "/v1/saved-searches/" + id.String() + "/start",
		body: map[string]any{"max_results": 10}, header: h})
}

type timedResponse struct {
	res *response
	err error
	at  time.Time
}

func (b *bundle) startAsync(id uuid.UUID, key, prefer string) <-chan timedResponse {
	ch := make(chan timedResponse, 1)
	go func() {
		res, err := b.startPrefer(id, key, prefer)
		ch <- timedResponse{res, err, time.Now()}
	}()
	return ch
}

// lockSavedSearch holds a row lock on the saved search until the returned
// function is called. A freeze reads the saved search unhindered but
// cannot insert its snapshot (whose foreign key must share-lock the row),
// so a real start that claimed its key blocks inside its freeze, holding
// a live claim, until the lock goes.
func (b *waitBundle) lockSavedSearch(t *testing.T, id uuid.UUID) (unlock func()) {
	t.Helper()
	tx, err := b.admin.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			if err := tx.Rollback(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(unlock)
	// With its organization: a cluster locks a row in a statement routed
	// to its one shard.
	if _, err := tx.Exec(context.Background(), `SELECT 1 FROM agent.saved_searches WHERE organization_id = $1 AND id = $2 FOR UPDATE`,
		b.org, id); err != nil {
		t.Fatal(err)
	}
	return unlock
}

// waitForBlockedFreeze waits until key's claim is stored processing and a
// backend waits on a lock: the holder is inside its freeze.
func (b *waitBundle) waitForBlockedFreeze(t *testing.T, key string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var status string
		err := b.admin.QueryRow(context.Background(), `
			SELECT coalesce((SELECT status FROM agent.idempotency_keys WHERE organization_id = $1 AND key = $2), '')`,
			b.org, key).Scan(&status)
		if err != nil {
			t.Fatal(err)
		}
		waiting, err := pgtest.LockWaits(context.Background(), b.admin)
		if err != nil {
			t.Fatal(err)
		}
		if status == string(idempotency.StatusProcessing) && waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder never blocked inside its freeze (claim %q, %d backends waiting on locks)", status, waiting)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runOf returns the Run a start answered, failing unless it answered one.
func runOf(t *testing.T, who string, r timedResponse) (uuid.UUID, bool) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: %v", who, r.err)
	}
	if r.res.status != http.StatusCreated && r.res.status != http.StatusOK {
		t.Fatalf("%s = %d %s, want 201 or 200", who, r.res.status, r.res.body)
	}
	if r.res.status == http.StatusOK && r.res.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("%s: 200 without Idempotent-Replayed", who)
	}
	var got startResult
	r.res.decode(t, &got)
	return got.Run.ID, r.res.status == http.StatusCreated
}

func TestWaitingStartAnswersTheMomentTheHolderCompletes(t *testing.T) {
	t.Parallel()
	b := waitSetup(t, 8)
	ss := b.seedSavedSearch(seedOpts{})
	unlock := b.lockSavedSearch(t, ss.ID)

	holder := b.startAsync(ss.ID, "k", "")
	b.waitForBlockedFreeze(t, "k")
	waiter := b.startAsync(ss.ID, "k", "wait=20")
	time.Sleep(300 * time.Millisecond) // the waiter meets the live claim and waits
	select {
	case r := <-waiter:
		t.Fatalf("the waiter answered %d %s while the holder was still freezing", r.res.status, r.res.body)
	default:
	}

	released := time.Now()
	unlock() // the holder's freeze completes its claim, the real way
	h, w := <-holder, <-waiter
	holderRun, holderCreated := runOf(t, "holder", h)
	waiterRun, waiterCreated := runOf(t, "waiter", w)
	if holderRun != waiterRun || holderCreated == waiterCreated {
		t.Errorf("holder Run %s (created %v), waiter Run %s (created %v): want one Run, admitted by one of them",
			holderRun, holderCreated, waiterRun, waiterCreated)
	}
	// Neither the 30 s lease nor the 20 s wait ran out: the completion's
	// notification woke the waiter (without it, the waiter would sleep to
	// the end of its wait and answer 409, which runOf refuses). The bound
	// leaves a loaded machine room (5 s was overrun once, at load 26).
	if d := w.at.Sub(released); d > 15*time.Second {
		t.Errorf("the waiter answered %s after the holder could complete, want it woken at once", d)
	}
	if got := w.res.header.Get("Preference-Applied"); got != "wait=20" {
		t.Errorf("waiter Preference-Applied = %q, want wait=20", got)
	}
	if got := h.res.header.Get("Preference-Applied"); got != "" {
		t.Errorf("holder, which sent no Prefer, got Preference-Applied %q", got)
	}
	b.wantCount(t, 1, `SELECT count(*) FROM agent.saved_search_snapshots`)
}

// holdClaim claims the preparation of the start startPrefer sends, as
// another worker would, with the given lease.
func (b *waitBundle) holdClaim(t *testing.T, ssID uuid.UUID, key string, lease time.Duration) {
	t.Helper()
	plane := idempotency.NewService(b.admin, idempotency.Config{})
	out, err := plane.Claim(context.Background(), b.org, idempotency.ScopeSavedSearchStart, key,
		admission.SavedSearchRequestHash(ssID, admission.StartOptions{MaxResults: 10}), lease)
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim = %v, %v; want claimed", out.Kind, err)
	}
}

func TestWaitingStartWhoseWaitRunsOutAnswersInProgress(t *testing.T) {
	t.Parallel()
	b := waitSetup(t, 8)
	ss := b.seedSavedSearch(seedOpts{})
	b.holdClaim(t, ss.ID, "k", 30*time.Second)

	began := time.Now()
	res, err := b.startPrefer(ss.ID, "k", "wait=1")
	if err != nil {
		t.Fatal(err)
	}
	if res.status != http.StatusConflict || res.problem(t).Code != api.CodeInProgress {
		t.Fatalf("start whose wait ran out = %d %s, want 409 in_progress", res.status, res.body)
	}
	if d := time.Since(began); d < time.Second {
		t.Errorf("answered after %s, before its 1 s wait ran out", d)
	}
	if ra, _ := strconv.Atoi(res.header.Get("Retry-After")); ra != 1 {
		t.Errorf("Retry-After = %q, want 1: a hint of when the answer is likely ready, not the rest of the 30 s lease", res.header.Get("Retry-After"))
	}
	if got := res.header.Get("Preference-Applied"); got != "wait=1" {
		t.Errorf("Preference-Applied = %q, want wait=1", got)
	}

	// Without the preference the answer is the same 409, at once.
	began = time.Now()
	if res, err = b.startPrefer(ss.ID, "k", ""); err != nil {
		t.Fatal(err)
	}
	if res.status != http.StatusConflict || time.Since(began) > 5*time.Second ||
		res.header.Get("Preference-Applied") != "" {
		t.Errorf("start without Prefer = %d after %s (Preference-Applied %q), want 409 at once and no preference",
			res.status, time.Since(began), res.header.Get("Preference-Applied"))
	}
}

func TestWaitingStartReclaimsWhenTheHoldersLeasePasses(t *testing.T) {
	t.Parallel()
	b := waitSetup(t, 8)
	ss := b.seedSavedSearch(seedOpts{})
	// A holder that dies: it never completes nor releases, so nothing
	// notifies; only its 1 s lease passing frees the key.
	b.holdClaim(t, ss.ID, "k", time.Second)

	began := time.Now()
	res, err := b.startPrefer(ss.ID, "k", "wait=25")
	if err != nil {
		t.Fatal(err)
	}
	if res.status != http.StatusCreated {
		t.Fatalf("start = %d %s, want 201: the waiter reclaims and admits", res.status, res.body)
	}
	// Nothing ever notifies, so only the lease passing let it claim: had
	// the waiter slept through its wait, it would have answered 409.
	t.Logf("answered after %s", time.Since(began))
	b.wantCount(t, 1, `SELECT count(*) FROM agent.runs`)
}

func TestManyWaitersAreAllAnsweredOnBoundedConnections(t *testing.T) {
	t.Parallel()
	const waiters = 200
	// The 200 arrive at once and each takes one of the 8 seats for its
	// claim before it sleeps: on a busy machine seating them all can take
	// longer than the seat queue's 10 s, which would refuse some 429.
	// This test is of the connections waiters hold, not of admission
	// (admission_test.go), so the wait for a seat is raised to 2 minutes.
	b := waitSetup(t, 8, func(d *api.Deps) {
		q := seatqtest.New(t, seatq.Config{Seats: 8, MaxWait: 2 * time.Minute})
		d.Seats = q
	})
	ss := b.seedSavedSearch(seedOpts{})
	unlock := b.lockSavedSearch(t, ss.ID)
	holder := b.startAsync(ss.ID, "many", "")
	b.waitForBlockedFreeze(t, "many")

	answers := make([]<-chan timedResponse, waiters)
	for i := range answers {
		answers[i] = b.startAsync(ss.ID, "many", "wait=25")
	}
	time.Sleep(2 * time.Second) // every waiter has met the live claim and sleeps
	var conns int
	// Client sessions: on Citus the coordinator's database also holds the
	// sessions of the nodes' maintenance daemons (application_name
	// citus_internal ...), which are not the server's.
	if err := b.admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND backend_type = 'client backend' AND application_name NOT LIKE 'citus\_internal%'`).Scan(&conns); err != nil {
		t.Fatal(err)
	}
	// The server's pool, the hub's LISTEN connection, and the test's own
	// two: the lock's transaction and the one asking.
	t.Logf("%d connections to the database while %d requests wait", conns, waiters)
	if limit := int(b.maxConns) + 1 + 2; conns > limit {
		t.Errorf("%d connections while %d requests wait, want at most %d", conns, waiters, limit)
	}
	for i, ch := range answers {
		select {
		case r := <-ch:
			t.Fatalf("waiter %d answered %d %s before the holder completed", i, r.res.status, r.res.body)
		default:
		}
	}

	unlock()
	runIDs := map[uuid.UUID]int{}
	created := 0
	for i, ch := range append(answers, holder) {
		id, isNew := runOf(t, "start "+strconv.Itoa(i), <-ch)
		runIDs[id]++
		if isNew {
			created++
		}
	}
	if len(runIDs) != 1 || created != 1 {
		t.Errorf("answers name %d Runs with %d admissions, want 1 Run admitted once", len(runIDs), created)
	}
	b.wantCount(t, 1, `SELECT count(*) FROM agent.runs`)
}

func TestPreferenceAppliedOnlyWhereAWaitCouldShapeTheAnswer(t *testing.T) {
	t.Parallel()
	b := waitSetup(t, 8)
	ss := b.seedSavedSearch(seedOpts{})
	tests := []struct {
		name, prefer string
		id           uuid.UUID
		wantStatus   int
		wantApplied  string
	}{
		{"over the maximum is cut to it", "respond-async, wait=120", ss.ID, http.StatusCreated, "wait=30"},
		{"a replay applies it too", "wait=3", ss.ID, http.StatusOK, "wait=3"},
		{"zero is a valid wait", "wait=0", ss.ID, http.StatusOK, "wait=0"},
		{"malformed is ignored", "wait=soon", ss.ID, http.StatusOK, ""},
		{"absent", "", ss.ID, http.StatusOK, ""},
		{"no such saved search", "wait=3", uuid.New(), http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		res, err := b.startPrefer(tt.id, "applied-"+tt.id.String(), tt.prefer)
		if err != nil {
			t.Fatal(err)
		}
		if res.status != tt.wantStatus || res.header.Get("Preference-Applied") != tt.wantApplied {
			t.Errorf("%s: Prefer %q = %d, Preference-Applied %q; want %d, %q", tt.name, tt.prefer,
				res.status, res.header.Get("Preference-Applied"), tt.wantStatus, tt.wantApplied)
		}
	}
}

// TestServerThatDoesNotWaitIgnoresThePreference: a server without the
// claim listener asked to wait 30 s for a live claim answers 409 without
// applying the preference. That it did not wait is read from the clock by
// a bound no load can fake: a server that waited could not answer before
// the 30 s asked; this one must answer before 25 s (in practice, in
// milliseconds).
func TestServerThatDoesNotWaitIgnoresThePreference(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{}) // no hub, no MaxPreferWait
	ss := b.seedSavedSearch(seedOpts{})
	plane := idempotency.NewService(b.pool, idempotency.Config{})
	if out, err := plane.Claim(context.Background(), b.org, idempotency.ScopeSavedSearchStart, "k",
		admission.SavedSearchRequestHash(ss.ID, admission.StartOptions{MaxResults: 10}), time.Minute); err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim = %v, %v", out.Kind, err)
	}
	began := time.Now()
	res, err := b.startPrefer(ss.ID, "k", "wait=30")
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	if res.status != http.StatusConflict || took >= 25*time.Second || res.header.Get("Preference-Applied") != "" {
		t.Errorf("start = %d after %s, Preference-Applied %q; want 409 without waiting, no preference applied",
			res.status, took, res.header.Get("Preference-Applied"))
	}
}

func TestMaxPreferWaitIsValidated(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	st := newStores(pool, nil)
	deps := st.deps(t, providerjobs.Config{})
	for _, d := range []time.Duration{-time.Second, 31 * time.Second, 1500 * time.Millisecond} {
		deps.MaxPreferWait = d
		if _, err := api.New(deps); err == nil {
			t.Errorf("api.New with MaxPreferWait %s = nil error, want it refused", d)
		}
	}
	for _, d := range []time.Duration{0, time.Second, api.PreferWaitLimit} {
		deps.MaxPreferWait = d
		if _, err := api.New(deps); err != nil {
			t.Errorf("api.New with MaxPreferWait %s = %v, want it accepted", d, err)
		}
	}
}
