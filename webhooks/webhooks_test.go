package webhooks_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/outbound"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/webhooks"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

type bundle struct {
	ctx   context.Context
	db    *pgxpool.Pool
	clock *dbclock.Clock
	runs  *runs.Store
	hooks *webhooks.Store
	org   uuid.UUID
}

// setup returns a fresh database's stores at clock (nil: the database's).
func setup(t *testing.T, clock *dbclock.Clock) *bundle {
	t.Helper()
	db := pgtest.NewDB(t)
	return &bundle{ctx: context.Background(), db: db, clock: clock,
		runs:  runs.NewStore(db, runs.Config{Clock: clock}),
		hooks: webhooks.NewStore(db, webhooks.Config{Clock: clock, AllowHTTPLoopback: true}), org: uuid.New()}
}

func (b *bundle) endpoint(t *testing.T, url string, types ...string) *webhooks.Endpoint {
	t.Helper()
	e, err := b.hooks.Create(b.ctx, b.org, webhooks.CreateParams{URL: url, EventTypes: types, Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (b *bundle) admit(t *testing.T, org uuid.UUID) *runs.Run {
	t.Helper()
	name := "enrich.company"
	run, created, err := b.runs.Admit(b.ctx, runs.AdmitParams{OrganizationID: org, Kind: runs.KindCapability,
		StartKey: runs.DirectStartKey(uuid.NewString()), RequestHash: "h", Name: &name,
		Input: json.RawMessage(`{"domain":"example.com"}`), Actor: "alice"})
	if err != nil || !created {
		t.Fatalf("Admit = %v, %v", created, err)
	}
	return run
}

func (b *bundle) report(t *testing.T, run *runs.Run, status string) {
	t.Helper()
	r := runs.StatusReport{Status: status, Reporter: "runtime"}
	if status == runs.StatusSucceeded {
		r.ResultRef = "s3://results/" + run.ID.String()
	}
	if _, _, err := b.runs.Report(b.ctx, b.org, run.ID, r); err != nil {
		t.Fatal(err)
	}
}

// events returns the (type, seq) of the deliveries of run, by endpoint
// and seq.
func (b *bundle) events(t *testing.T, run uuid.UUID) []string {
	t.Helper()
	rows, err := b.db.Query(b.ctx, `SELECT endpoint_id, seq, type FROM agent.webhook_deliveries
		WHERE run_id = $1 ORDER BY endpoint_id, seq`, run)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			ep   uuid.UUID
			seq  int64
			kind string
		)
		if err := rows.Scan(&ep, &seq, &kind); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%d:%s", ep.String()[:8], seq, kind))
	}
	return out
}

// TestEventsAreWrittenInTheRunsTransaction: every change of a Run writes
// one delivery per enabled, subscribed endpoint of its organization in
// the transaction that makes it; a change that rolls back writes none,
// and a report that changes nothing writes nothing.
func TestEventsAreWrittenInTheRunsTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	all := b.endpoint(t, "https://hooks.example.com/all")
	done := b.endpoint(t, "https://hooks.example.com/done", "run.succeeded", "run.failed")
	off := b.endpoint(t, "https://hooks.example.com/off")
	if _, err := b.hooks.Update(b.ctx, b.org, off.ID, webhooks.UpdateParams{State: ptr(webhooks.StateDisabled)}); err != nil {
		t.Fatal(err)
	}
	a, d := all.ID.String()[:8], done.ID.String()[:8]

	run := b.admit(t, b.org)
	if got, want := b.events(t, run.ID), []string{a + ":1:run.admitted"}; !slices.Equal(got, want) {
		t.Fatalf("after admission: %v, want %v", got, want)
	}

	// A report inside a transaction that rolls back changes the Run and
	// writes its event there, and both go.
	tx, err := b.db.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.ctx) // a no-op after the Rollback below; ends it on a failure before
	inTx := runs.NewStore(tx, runs.Config{})
	if _, changed, err := inTx.Report(b.ctx, b.org, run.ID, runs.StatusReport{Status: runs.StatusRunning}); err != nil || !changed {
		t.Fatalf("Report in tx = %v, %v", changed, err)
	}
	if n := pgtest.Count(t, tx, `SELECT count(*) FROM agent.webhook_deliveries WHERE run_id = $1`, run.ID); n != 2 {
		t.Fatalf("inside the transaction: %d deliveries, want 2", n)
	}
	if err := tx.Rollback(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := b.events(t, run.ID), []string{a + ":1:run.admitted"}; !slices.Equal(got, want) {
		t.Fatalf("after a rolled back report: %v, want %v", got, want)
	}

	// The dispatcher's queued -> dispatched writes run.dispatched.
	ds := dispatch.NewStore(b.db, nil)
	l, err := ds.LeasePass(b.ctx, 1, time.Minute)
	if err != nil || len(l) != 1 {
		t.Fatalf("dispatch lease = %v, %v", l, err)
	}
	if held, err := ds.End(b.ctx, dispatch.End{Leased: dispatch.Leased{OrganizationID: b.org, RunID: run.ID, Attempt: l[0].Attempt},
		Outcome: dispatch.OutcomeDelivered, StatusCode: 202}); err != nil || !held {
		t.Fatalf("dispatch End = %v, %v", held, err)
	}
	b.report(t, run, runs.StatusRunning)
	b.report(t, run, runs.StatusRunning) // changes nothing: writes nothing
	b.report(t, run, runs.StatusSucceeded)
	b.report(t, run, runs.StatusSucceeded)
	want := []string{a + ":1:run.admitted", a + ":2:run.dispatched", a + ":3:run.running", a + ":4:run.succeeded",
		d + ":4:run.succeeded"}
	if a > d {
		want = append([]string{d + ":4:run.succeeded"}, want[:4]...)
	}
	if got := b.events(t, run.ID); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	// The event carries the Run as the change left it.
	var ref *string
	if err := b.db.QueryRow(b.ctx, `SELECT result_ref FROM agent.webhook_deliveries WHERE run_id = $1 AND seq = 4
		AND endpoint_id = $2`, run.ID, all.ID).Scan(&ref); err != nil || ref == nil || !strings.HasPrefix(*ref, "s3://") {
		t.Errorf("result_ref = %v, %v", ref, err)
	}

	// An organization without endpoints gets no row; an endpoint created
	// after a change gets none of it, even from a report that changes
	// nothing.
	other := b.admit(t, uuid.New())
	if got := b.events(t, other.ID); len(got) != 0 {
		t.Errorf("an organization without endpoints: %v", got)
	}
	late := b.endpoint(t, "https://hooks.example.com/late")
	b.report(t, run, runs.StatusSucceeded)
	if n := pgtest.Count(t, b.db, `SELECT count(*) FROM agent.webhook_deliveries WHERE endpoint_id = $1`, late.ID); n != 0 {
		t.Errorf("an endpoint created after the change got %d deliveries", n)
	}
}

// TestACancelEmitsItsEventInItsTransaction: a Run cancelled at once
// emits run.cancelled with the version the cancel made; a repeat, and a
// cancel request for a Run the runtime has (no status change), write
// nothing.
func TestACancelEmitsItsEventInItsTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.endpoint(t, "https://hooks.example.com/all").ID.String()[:8]

	queued := b.admit(t, b.org)
	for range 2 {
		if _, err := b.runs.Cancel(b.ctx, b.org, queued.ID, runs.CancelRequest{Actor: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.events(t, queued.ID), []string{a + ":1:run.admitted", a + ":2:run.cancelled"}; !slices.Equal(got, want) {
		t.Errorf("a queued Run cancelled twice: %v, want %v", got, want)
	}

	running := b.admit(t, b.org)
	b.report(t, running, runs.StatusRunning)
	if _, err := b.runs.Cancel(b.ctx, b.org, running.ID, runs.CancelRequest{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.events(t, running.ID), []string{a + ":1:run.admitted", a + ":2:run.running"}; !slices.Equal(got, want) {
		t.Errorf("a cancel request for a running Run: %v, want %v", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// receiver is a product's endpoint that misbehaves: it verifies every
// delivery with the Standard Webhooks library, keeps what it processed by
// webhook-id, and answers by fate: processed and 2xx, a 500 before
// processing, a hang past the sender's timeout, a cut connection before
// processing, or a cut connection after processing (the sender never
// learns it was received).
type receiver struct {
	t   *testing.T
	srv *httptest.Server
	wh  *standardwebhooks.Webhook

	mu        sync.Mutex
	n         int
	processed map[string]webhooks.Message // by webhook-id
	seen      map[uuid.UUID]int64         // the highest seq processed, by Run
	requests  int
	ids       map[string]map[string]bool // webhook-id -> the bodies it came with
	disorder  []string
}

func newReceiver(t *testing.T, secret string, misbehave bool) *receiver {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t, wh: wh, processed: map[string]webhooks.Message{}, seen: map[uuid.UUID]int64{},
		ids: map[string]map[string]bool{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := rc.wh.Verify(body, r.Header); err != nil {
			t.Errorf("delivery %s does not verify: %v", r.Header.Get("webhook-id"), err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var m webhooks.Message
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		id := r.Header.Get("webhook-id")
		rc.mu.Lock()
		rc.requests++
		rc.n++
		fate := 0
		if misbehave {
			fate = rc.n % 5
		}
		if rc.ids[id] == nil {
			rc.ids[id] = map[string]bool{}
		}
		rc.ids[id][string(body)] = true
		// In order: an event arrives only after every earlier one of its
		// Run was processed.
		if _, dup := rc.processed[id]; !dup && m.Data.Seq > rc.seen[m.Data.RunID]+1 && m.Data.Seq > 1 {
			rc.disorder = append(rc.disorder, fmt.Sprintf("%s arrived after seq %d", id, rc.seen[m.Data.RunID]))
		}
		process := func() {
			if _, dup := rc.processed[id]; !dup {
				rc.processed[id] = m
				rc.seen[m.Data.RunID] = max(rc.seen[m.Data.RunID], m.Data.Seq)
			}
		}
		if fate == 0 || fate == 4 {
			process()
		}
		rc.mu.Unlock()
		switch fate {
		case 0:
			w.WriteHeader(http.StatusNoContent)
		case 1:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "overloaded", http.StatusInternalServerError)
		case 2:
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case 3, 4:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// TestDeliveredOnceEachInEffectInOrder: two workers (two replicas) deliver
// every event of many Runs through a receiver that fails, times out and
// cuts connections; the receiver, dropping what it saw by webhook-id,
// processes every event, each Run's in order, and every attempt of one
// event carried the same webhook-id and body.
func TestDeliveredOnceEachInEffectInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// The receiver verifies with the endpoint's secret, so it starts after
	// the endpoint, which then moves to it.
	ep := b.endpoint(t, "http://127.0.0.1:1/placeholder")
	rc := newReceiver(t, ep.Secret, true)
	if _, err := b.hooks.Update(b.ctx, b.org, ep.ID, webhooks.UpdateParams{URL: ptr(rc.srv.URL + "/hooks")}); err != nil {
		t.Fatal(err)
	}
	const nRuns = 12
	var want []string
	for range nRuns {
		run := b.admit(t, b.org)
		b.report(t, run, runs.StatusRunning)
		b.report(t, run, runs.StatusSucceeded)
		for seq := 1; seq <= 3; seq++ {
			want = append(want, webhooks.MessageID(run.ID, int64(seq)))
		}
	}
	ctx, cancel := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	for range 2 {
		w, err := webhooks.NewWorker(b.hooks, webhooks.WorkerConfig{Config: outbound.Config{Timeout: 200 * time.Millisecond,
			Interval: 20 * time.Millisecond, MinBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
			Concurrency: 4}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { w.Run(ctx) })
	}
	deadline := time.Now().Add(2 * time.Minute)
	for pgtest.Count(t, b.db, `SELECT count(*) FROM agent.webhook_deliveries WHERE state = 'pending'`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("deliveries still pending after 2 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()

	rc.mu.Lock()
	defer rc.mu.Unlock()
	var got []string
	for id := range rc.processed {
		got = append(got, id)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("processed %d events, want %d: %v", len(got), len(want), got)
	}
	if len(rc.disorder) > 0 {
		t.Errorf("out of order: %v", rc.disorder)
	}
	for id, bodies := range rc.ids {
		if len(bodies) != 1 {
			t.Errorf("%s came with %d different bodies", id, len(bodies))
		}
	}
	if rc.requests <= len(want) {
		t.Errorf("%d requests for %d events: the receiver never misbehaved", rc.requests, len(want))
	}
	m := rc.processed[want[0]]
	if m.Type != m.Data.Type || !strings.HasPrefix(m.Type, "run.") || m.Data.RunID == uuid.Nil {
		t.Errorf("message = %+v", m)
	}
	t.Logf("%d events, %d requests", len(want), rc.requests)
}

// TestSignatureVerifiesWithTheEndpointsSecretOnly: a delivery verifies
// with the endpoint's secret (the standard library's Verify), not with
// another endpoint's; its body is the Standard Webhooks message of the
// event.
func TestSignatureVerifiesWithTheEndpointsSecretOnly(t *testing.T) {
	t.Parallel()
	stub := dbclocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	b := setup(t, stub.Clock())
	var (
		mu   sync.Mutex
		got  []byte
		head http.Header
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got, _ = io.ReadAll(r.Body)
		head = r.Header.Clone()
	}))
	t.Cleanup(srv.Close)
	ep := b.endpoint(t, srv.URL)
	other := b.endpoint(t, "https://hooks.example.com/other", "run.failed")
	run := b.admit(t, b.org)
	w, _ := webhooks.NewWorker(b.hooks, webhooks.WorkerConfig{})
	l, err := b.hooks.LeasePass(b.ctx, 10, time.Minute)
	if err != nil || len(l) != 1 {
		t.Fatalf("lease = %v, %v", l, err)
	}
	if !w.Deliver(b.ctx, l[0]) {
		t.Fatal("not delivered")
	}
	mu.Lock()
	defer mu.Unlock()
	wh, _ := standardwebhooks.NewWebhook(ep.Secret)
	if err := wh.Verify(got, head); err != nil {
		t.Errorf("Verify with the endpoint's secret: %v", err)
	}
	wrong, _ := standardwebhooks.NewWebhook(other.Secret)
	if err := wrong.Verify(got, head); err == nil {
		t.Error("the delivery verifies with another endpoint's secret")
	}
	want := fmt.Sprintf(`{"type":"run.admitted","timestamp":"2026-12-01T09:00:00Z","data":{"run_id":"%s","seq":1,`+
		`"type":"run.admitted","status":"queued","occurred_at":"2026-12-01T09:00:00Z"}}`, run.ID)
	if string(got) != want || head.Get("webhook-id") != webhooks.MessageID(run.ID, 1) {
		t.Errorf("body %s, id %s; want %s, %s", got, head.Get("webhook-id"), want, webhooks.MessageID(run.ID, 1))
	}
	if !strings.HasPrefix(ep.Secret, "whsec_") || len(ep.Secret) != len("whsec_")+44 {
		t.Errorf("secret %q is not whsec_ and 32 bytes", ep.Secret)
	}
}

// TestEndpointIsDisabledAfterTheFailureWindow: an endpoint that fails
// every attempt for longer than DisableAfter is disabled with a reason,
// its deliveries stop; enabled again, they are delivered.
func TestEndpointIsDisabledAfterTheFailureWindow(t *testing.T) {
	t.Parallel()
	stub := dbclocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	b := setup(t, stub.Clock())
	var (
		mu   sync.Mutex
		fail = true
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	t.Cleanup(srv.Close)
	ep := b.endpoint(t, srv.URL)
	b.admit(t, b.org)
	b.admit(t, b.org)
	w, _ := webhooks.NewWorker(b.hooks, webhooks.WorkerConfig{DisableAfter: time.Hour, Config: outbound.Config{MaxBackoff: time.Minute}})
	pass := func() int {
		t.Helper()
		l, err := b.hooks.LeasePass(b.ctx, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range l {
			w.Deliver(b.ctx, d)
		}
		return len(l)
	}
	if n := pass(); n != 2 {
		t.Fatalf("first pass leased %d, want 2", n)
	}
	for range 5 { // failing for 50 minutes: still enabled
		stub.Advance(10 * time.Minute)
		pass()
	}
	if e, _ := b.hooks.Get(b.ctx, b.org, ep.ID); e.State != webhooks.StateEnabled || e.FailingSince == nil ||
		!e.FailingSince.Equal(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("after 50 minutes: %+v", e)
	}
	stub.Advance(11 * time.Minute)
	pass()
	e, _ := b.hooks.Get(b.ctx, b.org, ep.ID)
	if e.State != webhooks.StateDisabled || e.DisabledReason == nil || !strings.Contains(*e.DisabledReason, "1h0m0s") {
		t.Fatalf("after 61 minutes: %+v, want disabled", e)
	}
	stub.Advance(time.Hour)
	if n := pass(); n != 0 {
		t.Fatalf("a disabled endpoint's deliveries were leased: %d", n)
	}
	// Its deliveries wait; new events of a disabled endpoint are not
	// written.
	b.admit(t, b.org)
	if n := pgtest.Count(t, b.db, `SELECT count(*) FROM agent.webhook_deliveries WHERE state = 'pending'`); n != 2 {
		t.Fatalf("%d pending deliveries, want 2", n)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	if e, err := b.hooks.Update(b.ctx, b.org, ep.ID, webhooks.UpdateParams{State: ptr(webhooks.StateEnabled)}); err != nil ||
		e.State != webhooks.StateEnabled || e.FailingSince != nil || e.DisabledReason != nil {
		t.Fatalf("enable = %+v, %v", e, err)
	}
	if n := pass(); n != 2 {
		t.Fatalf("after enabling, leased %d, want 2", n)
	}
	ds, err := b.hooks.Deliveries(b.ctx, b.org, ep.ID, 0)
	if err != nil || len(ds) != 2 {
		t.Fatalf("Deliveries = %v, %v", ds, err)
	}
	for _, d := range ds {
		if d.State != "delivered" || d.Attempts != 8 || len(d.History) != 8 || d.History[7].Outcome != "delivered" ||
			d.History[0].StatusCode == nil || *d.History[0].StatusCode != 502 {
			t.Errorf("delivery %+v", d)
		}
	}
}

// TestEndpointRules: the URL, type and state rules, and another
// organization's endpoint is not found.
// TestAnOrganizationHasAtMostMaxEndpoints: a create for the last place
// while another holds it uncommitted waits for it, then is ErrTooMany;
// another organization is not counted.
func TestAnOrganizationHasAtMostMaxEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for i := range webhooks.MaxEndpoints - 1 {
		b.endpoint(t, fmt.Sprintf("https://hooks.example.com/%d", i))
	}
	// The last place, taken in a transaction that has not committed yet.
	tx, err := b.db.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.ctx)
	if _, err := webhooks.NewStore(tx, webhooks.Config{}).Create(b.ctx, b.org,
		webhooks.CreateParams{URL: "https://hooks.example.com/last", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
	racer := make(chan error, 1)
	go func() {
		_, err := b.hooks.Create(b.ctx, b.org, webhooks.CreateParams{URL: "https://race.example.com", Actor: "a"})
		racer <- err
	}()
	// Commit once the racer waits for the organization's lock, or ended
	// (without the lock it counts the 99 committed and inserts).
	var ended error
	waiting := false
	for !waiting && ended == nil {
		select {
		case err := <-racer:
			ended = cmp.Or(err, errors.New("no error"))
		case <-time.After(10 * time.Millisecond):
			waiting = pgtest.Count(t, b.db, `SELECT count(*) FROM pg_stat_activity
				WHERE wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock%'`) > 0
		}
	}
	if err := tx.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	if ended == nil {
		ended = <-racer
	}
	if !errors.Is(ended, webhooks.ErrTooMany) {
		t.Errorf("a create racing for the last place = %v, want ErrTooMany", ended)
	}
	if n := pgtest.Count(t, b.db, `SELECT count(*) FROM agent.webhook_endpoints WHERE organization_id = $1`, b.org); n != webhooks.MaxEndpoints {
		t.Errorf("the organization has %d endpoints, want %d", n, webhooks.MaxEndpoints)
	}
	if _, err := b.hooks.Create(b.ctx, uuid.New(), webhooks.CreateParams{URL: "https://other.example.com", Actor: "a"}); err != nil {
		t.Errorf("another organization's first endpoint = %v", err)
	}
}

func TestEndpointRules(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	strict := webhooks.NewStore(b.db, webhooks.Config{})
	for _, tc := range []struct {
		s     *webhooks.Store
		url   string
		types []string
		field string
	}{
		{strict, "http://127.0.0.1:9/x", nil, "url"},
		{b.hooks, "http://example.com/x", nil, "url"},
		{strict, "ftp://example.com", nil, "url"},
		{strict, "https://user:pw@example.com", nil, "url"},
		{strict, "https://example.com", []string{"run.exploded"}, "event_types"},
	} {
		_, err := tc.s.Create(b.ctx, b.org, webhooks.CreateParams{URL: tc.url, EventTypes: tc.types, Actor: "a"})
		if !errs.Is(err, errs.Invalid) || len(errs.FieldsOf(err)) != 1 || errs.FieldsOf(err)[0].Name != tc.field {
			t.Errorf("Create(%s, %v) = %v, want invalid %s", tc.url, tc.types, err, tc.field)
		}
	}
	ep := b.endpoint(t, "http://localhost:8080/hooks")
	if _, err := b.hooks.Get(b.ctx, uuid.New(), ep.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Errorf("another organization's Get = %v", err)
	}
	if err := b.hooks.Delete(b.ctx, uuid.New(), ep.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Errorf("another organization's Delete = %v", err)
	}
	if _, err := b.hooks.Update(b.ctx, b.org, ep.ID, webhooks.UpdateParams{State: ptr("paused")}); !errs.Is(err, errs.Invalid) {
		t.Errorf("state paused = %v", err)
	}
	list, err := b.hooks.List(b.ctx, b.org)
	if err != nil || len(list) != 1 || list[0].Secret != "" {
		t.Errorf("List = %+v, %v (no secret in a list)", list, err)
	}
	j, _ := json.Marshal(list[0])
	if !strings.Contains(string(j), `"event_types":["run.admitted",`) {
		t.Errorf("JSON %s does not list every type", j)
	}
	if err := b.hooks.Delete(b.ctx, b.org, ep.ID); err != nil {
		t.Fatal(err)
	}
}

// TestAFailingLeasePassBacksOffDoubling: while its database is gone (here
// a closed pool), the worker waits after each failed lease pass the
// Interval, then twice as long each time up to 30 s (a stub clock records
// the waits), and logs each failure.
func TestAFailingLeasePassBacksOffDoubling(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var log pgtest.SyncBuffer
	w, err := webhooks.NewWorker(webhooks.NewStore(pgtest.ClosedPool(t, b.db), webhooks.Config{}),
		webhooks.WorkerConfig{Config: outbound.Config{Interval: 4 * time.Second, Logger: slog.New(slog.NewJSONHandler(&log, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	var waits []time.Duration
	webhooks.SetClock(w, func(_ context.Context, d time.Duration) bool {
		waits = append(waits, d)
		return len(waits) < len(want)
	})
	if err := w.Run(context.Background()); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if !slices.Equal(waits, want) {
		t.Errorf("the waits after failed lease passes = %v, want %v", waits, want)
	}
	if n := strings.Count(log.String(), `"msg":"webhooks: lease pass failed; backing off"`); n != len(want) {
		t.Errorf("%d failed passes logged, want %d:\n%s", n, len(want), log.String())
	}
}
