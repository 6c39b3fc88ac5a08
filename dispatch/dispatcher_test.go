package dispatch_test

import (
	"bytes"
	"context"
	"encoding/base64"
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

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/internal/outbound"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/runs"
)

// secret is the test runtime's signing key, and whsec its Standard
// Webhooks spelling, which the runtime verifies with.
var (
	secret = []byte("a-runtime-secret-of-32-bytes-ok!")
	whsec  = "whsec_" + base64.StdEncoding.EncodeToString(secret)
)

// runtime is a test runtime: it verifies every delivery's signature with
// the Standard Webhooks library, records it, and answers what answer says.
type runtime struct {
	t      *testing.T
	srv    *httptest.Server
	wh     *standardwebhooks.Webhook
	answer func(n int, w http.ResponseWriter, r *http.Request) // n: the delivery's number, from 1

	mu         sync.Mutex
	deliveries []delivery
}

type delivery struct {
	id     string
	body   []byte
	header http.Header
}

func newRuntime(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *runtime {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(whsec)
	if err != nil {
		t.Fatal(err)
	}
	rt := &runtime{t: t, wh: wh, answer: answer}
	rt.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := rt.wh.Verify(body, r.Header); err != nil {
			t.Errorf("delivery of %s does not verify: %v", r.Header.Get("webhook-id"), err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		rt.mu.Lock()
		rt.deliveries = append(rt.deliveries, delivery{id: r.Header.Get("webhook-id"), body: body, header: r.Header.Clone()})
		n := len(rt.deliveries)
		rt.mu.Unlock()
		if rt.answer == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		rt.answer(n, w, r)
	}))
	t.Cleanup(rt.srv.Close)
	return rt
}

func (rt *runtime) got() []delivery {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]delivery(nil), rt.deliveries...)
}

func (b *bundle) dispatcher(t *testing.T, url string, edit func(*dispatch.Config)) *dispatch.Dispatcher {
	t.Helper()
	cfg := dispatch.Config{URL: url, Secret: secret, Config: outbound.Config{Timeout: time.Second}}
	if edit != nil {
		edit(&cfg)
	}
	d, err := dispatch.NewDispatcher(b.store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDeliveryIsASignedMessageKeyedByTheRunID: the runtime gets the Run's
// message, signed for its secret, with the Run id as webhook-id; a 2xx
// dispatches the Run.
func TestDeliveryIsASignedMessageKeyedByTheRunID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rt := newRuntime(t, nil)
	d := b.dispatcher(t, rt.srv.URL, nil)
	run := b.admitSaved(t)
	l := b.lease(t, 1)
	if out := d.Deliver(b.ctx, l[0]); out != dispatch.OutcomeDelivered {
		t.Fatalf("Deliver = %q, want delivered", out)
	}
	got := rt.got()
	want, err := b.store.Message(b.ctx, b.org, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].id != run.ID.String() || !bytes.Equal(got[0].body, want) ||
		got[0].header.Get("Content-Type") != "application/json" {
		t.Fatalf("deliveries = %+v, want one of Run %s carrying its message", got, run.ID)
	}
	if dd := b.get(t, run); dd.State != dispatch.StateDispatched || *dd.LastStatusCode != http.StatusAccepted {
		t.Errorf("dispatch = %+v, want dispatched after a 202", dd)
	}
	if r, _ := b.runs.Get(b.ctx, b.org, run.ID); r.Status != runs.StatusDispatched {
		t.Errorf("Run status = %s, want dispatched", r.Status)
	}
	// A wrong secret does not verify: the runtime can tell searchd from
	// anyone else.
	other, _ := standardwebhooks.NewWebhookRaw([]byte("another-secret-of-32-bytes-long!"))
	if err := other.Verify(got[0].body, got[0].header); err == nil {
		t.Error("the delivery verifies with another secret")
	}
}

func TestDeliveryOutcomes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		answer     func(w http.ResponseWriter, r *http.Request)
		want       dispatch.Outcome
		wantState  string
		wantCode   int
		wantAnswer string
		// minRetry is the least the retry must wait (a Retry-After).
		minRetry time.Duration
	}{
		{"500 retries", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "overloaded", 500) },
			dispatch.OutcomeRetry, dispatch.StatePending, 500, "500 Internal Server Error overloaded", 0},
		{"503 with Retry-After retries after it", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(503)
		}, dispatch.OutcomeRetry, dispatch.StatePending, 503, "503 Service Unavailable", 30 * time.Second},
		{"408 retries", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(408) },
			dispatch.OutcomeRetry, dispatch.StatePending, 408, "408 Request Timeout", 0},
		{"429 retries", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(429) },
			dispatch.OutcomeRetry, dispatch.StatePending, 429, "429 Too Many Requests", 0},
		{"400 fails with the answer", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, `{"error":"unknown kind"}`, 400)
		}, dispatch.OutcomeFailed, dispatch.StateFailed, 400, `400 Bad Request {"error":"unknown kind"}`, 0},
		{"404 fails", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(404) },
			dispatch.OutcomeFailed, dispatch.StateFailed, 404, "404 Not Found", 0},
		{"a redirect fails", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) },
			dispatch.OutcomeFailed, dispatch.StateFailed, 302, "302 Found", 0},
		{"a timeout retries", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, dispatch.OutcomeRetry, dispatch.StatePending, 0, "no answer within 1s (timeout)", 0},
		{"a cut connection retries", func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
		}, dispatch.OutcomeRetry, dispatch.StatePending, 0, "no answer: ", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			rt := newRuntime(t, func(_ int, w http.ResponseWriter, r *http.Request) { tc.answer(w, r) })
			d := b.dispatcher(t, rt.srv.URL, nil)
			run := b.admit(t, b.org)
			if out := d.Deliver(b.ctx, b.lease(t, 1)[0]); out != tc.want {
				t.Fatalf("Deliver = %q, want %q", out, tc.want)
			}
			dd := b.get(t, run)
			code := 0
			if dd.LastStatusCode != nil {
				code = *dd.LastStatusCode
			}
			if dd.State != tc.wantState || code != tc.wantCode || dd.LastError == nil || !strings.HasPrefix(*dd.LastError, tc.wantAnswer) {
				t.Errorf("dispatch = %s, status %d, error %v; want %s, %d, %q...", dd.State, code, deref(dd.LastError),
					tc.wantState, tc.wantCode, tc.wantAnswer)
			}
			if tc.wantState == dispatch.StatePending {
				wait := dd.NextAttemptAt.Sub(b.clock.Now())
				if wait < max(tc.minRetry, dispatch.DefaultMinBackoff/2) || wait > max(tc.minRetry, dispatch.DefaultMinBackoff) {
					t.Errorf("retry due in %s, want between %s and %s", wait, max(tc.minRetry, dispatch.DefaultMinBackoff/2),
						max(tc.minRetry, dispatch.DefaultMinBackoff))
				}
			}
			if r, _ := b.runs.Get(b.ctx, b.org, run.ID); r.Status != runs.StatusQueued {
				t.Errorf("Run status = %s, want queued: only a 2xx dispatches it", r.Status)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestDispatchersShareTheOutbox: two dispatchers running at once (two
// replicas) deliver 150 Runs, each exactly once with a healthy runtime,
// and stop when their context ends.
func TestDispatchersShareTheOutbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.store = dispatch.NewStore(b.db, nil) // the database's clock: time runs
	b.runs = runs.NewStore(b.db, runs.Config{})
	rt := newRuntime(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(time.Millisecond)
		w.WriteHeader(http.StatusOK)
	})
	want := map[string]bool{}
	for range 150 {
		want[b.admit(t, b.org).ID.String()] = true
	}
	ctx, cancel := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	for range 2 {
		d := b.dispatcher(t, rt.srv.URL, func(c *dispatch.Config) { c.Batch, c.Concurrency = 10, 4 })
		wg.Go(func() {
			if err := d.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(rt.got()) < len(want) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	seen := map[string]int{}
	for _, d := range rt.got() {
		seen[d.id]++
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("Run %s delivered %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct Runs delivered, want %d", len(seen), len(want))
	}
	st, err := b.store.Stats(b.ctx)
	if err != nil || st.Pending != 0 {
		t.Errorf("Stats = %+v, %v; want nothing pending", st, err)
	}
}

func TestWakePassesBeforeTheInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.store = dispatch.NewStore(b.db, nil)
	b.runs = runs.NewStore(b.db, runs.Config{})
	rt := newRuntime(t, nil)
	d := b.dispatcher(t, rt.srv.URL, func(c *dispatch.Config) { c.Interval = time.Hour })
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	time.Sleep(100 * time.Millisecond) // the first pass found nothing; the next is an hour away
	run := b.admit(t, b.org)
	d.Wake()
	deadline := time.Now().Add(10 * time.Second)
	for len(rt.got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := rt.got(); len(got) != 1 || got[0].id != run.ID.String() {
		t.Errorf("deliveries after Wake = %d, want the Run at once", len(got))
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  dispatch.Config
		want string
	}{
		{dispatch.Config{Secret: secret}, "URL is required"},
		{dispatch.Config{URL: "ftp://x", Secret: secret}, "http or https"},
		{dispatch.Config{URL: "/relative", Secret: secret}, "http or https"},
		{dispatch.Config{URL: "http://x", Secret: []byte("short")}, "Secret"},
		{dispatch.Config{URL: "http://x", Secret: secret, Config: outbound.Config{Timeout: time.Hour}}, "Timeout"},
		{dispatch.Config{URL: "http://x", Secret: secret, Config: outbound.Config{Batch: 5000}}, "Batch"},
		{dispatch.Config{URL: "http://x", Secret: secret, Config: outbound.Config{Concurrency: -1}}, "Concurrency"},
		{dispatch.Config{URL: "http://x", Secret: secret, Config: outbound.Config{MinBackoff: time.Minute, MaxBackoff: time.Second}}, "MaxBackoff"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %q", tc.cfg, err, tc.want)
		}
	}
	if err := (dispatch.Config{URL: "https://runtime.example/hooks", Secret: secret}).Validate(); err != nil {
		t.Errorf("a valid config: %v", err)
	}
	if l := outbound.LeaseFor(10 * time.Second); l != 15*time.Second {
		t.Errorf("LeaseFor(10s) = %s, want 15s", l)
	}
	if l := outbound.LeaseFor(time.Minute); l != 75*time.Second {
		t.Errorf("LeaseFor(1m) = %s, want 1m15s", l)
	}
}

// TestAFailingLeasePassBacksOffDoubling: while its database is gone (here
// a closed pool), the dispatcher waits after each failed lease pass the
// Interval, then twice as long each time (up to 30 s): a stub clock
// records the waits. Each failure is logged.
func TestAFailingLeasePassBacksOffDoubling(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var log pgtest.SyncBuffer
	d, err := dispatch.NewDispatcher(dispatch.NewStore(pgtest.ClosedPool(t, b.db), b.clock.Clock()), dispatch.Config{
		URL: "http://127.0.0.1:1/runs", Secret: secret,
		Config: outbound.Config{Interval: 5 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(&log, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	var waits []time.Duration
	dispatch.SetClock(d, func(_ context.Context, w time.Duration) bool {
		waits = append(waits, w)
		return len(waits) < len(want)
	})
	if err := d.Run(context.Background()); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if !slices.Equal(waits, want) {
		t.Errorf("the waits after failed lease passes = %v, want %v", waits, want)
	}
	if n := strings.Count(log.String(), `"msg":"dispatch: lease pass failed; backing off"`); n != len(want) {
		t.Errorf("%d failed passes logged, want %d:\n%s", n, len(want), log.String())
	}
}
