package seatq_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/searchd/searchd/internal/seatq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is the deterministic test bench of the queue: an HTTP handler
// that takes a seat for each request and holds it inside the handler
// until the test lets it go (or for a set time of the bubble's clock),
// driven in a synctest bubble, whose clock moves only when every
// goroutine is blocked: a stub clock that needs no injection.
type harness struct {
	t *testing.T
	q *seatq.Queue

	mu sync.Mutex
	// served are the requests' ids in the order they got a seat.
	served []string
	// holds says how each request holds its seat: closed channel, or a
	// duration of the bubble's clock.
	holds map[string]chan struct{}
	times map[string]time.Duration
	// answers are the requests' answers, by id, once answered.
	answers map[string]*httptest.ResponseRecorder
	waited  map[string]time.Duration
}

// mustNew is seatq.New, failing t on an error.
func mustNew(t *testing.T, cfg seatq.Config) *seatq.Queue {
	t.Helper()
	q, err := seatq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func newHarness(t *testing.T, cfg seatq.Config) *harness {
	t.Helper()
	q := mustNew(t, cfg)
	h := &harness{t: t, q: q, holds: map[string]chan struct{}{}, times: map[string]time.Duration{},
		answers: map[string]*httptest.ResponseRecorder{}, waited: map[string]time.Duration{}}
	// A test that failed half-way lets every handler end, so the bubble
	// ends and the failure is reported.
	t.Cleanup(func() {
		h.mu.Lock()
		for id, hold := range h.holds {
			if _, answered := h.answers[id]; !answered && !closed(hold) {
				close(hold)
			}
		}
		h.mu.Unlock()
		synctest.Wait()
	})
	return h
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// waitedFor returns how long request id waited for its seat.
func (h *harness) waitedFor(id string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waited[id]
}

// ServeHTTP is the handler under admission: X-Org names the flow,
// X-Request the request.
func (h *harness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request")
	began := time.Now()
	width, _ := strconv.Atoi(r.Header.Get("X-Width"))
	seat, err := h.q.Acquire(r.Context(), seatq.Flow{Kind: seatq.KindOrganization, Name: r.Header.Get("X-Org")}, width)
	h.mu.Lock()
	h.waited[id] = time.Since(began)
	h.mu.Unlock()
	var refusal *seatq.Refusal
	switch {
	case errors.As(err, &refusal):
		w.Header().Set("Retry-After", strconv.Itoa(int(refusal.RetryAfter/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	case err != nil:
		w.WriteHeader(499) // the client went away
		return
	}
	defer seat.Release()
	h.mu.Lock()
	h.served = append(h.served, id)
	hold, d := h.holds[id], h.times[id]
	h.mu.Unlock()
	if hold != nil {
		<-hold
	} else {
		time.Sleep(d)
	}
	w.WriteHeader(http.StatusOK)
}

// send starts a request of org, held until let(id) (or for d when d > 0),
// and waits until it is seated or queued: every goroutine of the bubble
// is blocked again.
func (h *harness) send(ctx context.Context, org, id string, d time.Duration) {
	h.mu.Lock()
	if d > 0 {
		h.times[id] = d
	} else {
		h.holds[id] = make(chan struct{})
	}
	h.mu.Unlock()
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	r.Header.Set("X-Org", org)
	r.Header.Set("X-Request", id)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		h.mu.Lock()
		h.answers[id] = rec
		h.mu.Unlock()
	}()
	synctest.Wait()
}

// let ends the handler of id, and waits until the freed seat went on.
func (h *harness) let(id string) {
	h.mu.Lock()
	hold := h.holds[id]
	h.mu.Unlock()
	close(hold)
	synctest.Wait()
}

func (h *harness) servedSoFar() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.served...)
}

func (h *harness) answer(id string) *httptest.ResponseRecorder {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.answers[id]
}

// empty checks that the queue holds nothing: no seat in use, nobody
// waiting, no flow remembered.
func (h *harness) empty() {
	h.t.Helper()
	if st := h.q.Stats(10); st.InUse != 0 || st.Queued != 0 || st.Waiting != 0 || st.FlowsTotal != 0 {
		h.t.Errorf("queue at rest = %+v, want nothing in use, waiting or remembered", st)
	}
}

// TestAFreeSeatIsTakenAtOnceWhoeverAsks: with seats free, requests are
// seated without waiting, however many of them one organization sends: an
// organization alone may take every seat. Only the request beyond the
// seats waits.
func TestAFreeSeatIsTakenAtOnceWhoeverAsks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, seatq.Config{Seats: 8})
		for i := range 8 {
			h.send(t.Context(), "alone", fmt.Sprint("r", i), 0)
		}
		if got := len(h.servedSoFar()); got != 8 {
			t.Fatalf("one organization's 8 requests on 8 free seats: %d seated, want all 8", got)
		}
		for i := range 8 {
			if w := h.waitedFor(fmt.Sprint("r", i)); w != 0 {
				t.Errorf("request %d waited %s for a free seat, want 0", i, w)
			}
		}
		if st := h.q.Stats(0); st.InUse != 8 || st.Queued != 0 {
			t.Errorf("stats = %+v, want 8 in use, none queued", st)
		}
		h.send(t.Context(), "alone", "ninth", 0)
		if got := len(h.servedSoFar()); got != 8 {
			t.Fatalf("the ninth request with every seat taken was seated")
		}
		h.let("r0")
		if s := h.servedSoFar(); s[len(s)-1] != "ninth" {
			t.Errorf("the seat r0 freed went to %q, want the waiting ninth", s[len(s)-1])
		}
		for i := 1; i < 8; i++ {
			h.let(fmt.Sprint("r", i))
		}
		h.let("ninth")
		h.empty()
	})
}

// TestFreedSeatsGoRoundRobinAcrossOrganizations: with the one seat
// taken, a, b and c queue requests in the order a1 a2 a3 a4 b1 b2 c1; the
// seat then goes round the organizations in the order they began to wait
// (a, b, c, a, b, a, a), not in the order the requests came.
func TestFreedSeatsGoRoundRobinAcrossOrganizations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, seatq.Config{Seats: 1})
		h.send(t.Context(), "a", "holder", 0)
		for _, r := range []struct{ org, id string }{
			{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"a", "a4"}, {"b", "b1"}, {"b", "b2"}, {"c", "c1"},
		} {
			h.send(t.Context(), r.org, r.id, 0)
		}
		prev := "holder"
		for range 7 {
			h.let(prev)
			s := h.servedSoFar()
			prev = s[len(s)-1]
		}
		h.let(prev)
		want := []string{"holder", "a1", "b1", "c1", "a2", "b2", "a3", "a4"}
		if got := h.servedSoFar(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("seated in the order %v, want %v", got, want)
		}
		h.empty()
	})
}

// TestALightOrganizationWaitsForAtMostOneRequestPerBusierOne: two heavy
// organizations each queue 50 requests, each request holding its seat 10
// ms of the bubble's clock; then a light organization sends one. With one
// seat, it must be seated after at most two others (one per heavy
// organization), so within three requests' time (the holder's, then
// one of each heavy organization); with two seats, within two requests'
// time: however long the heavy queues are.
func TestALightOrganizationWaitsForAtMostOneRequestPerBusierOne(t *testing.T) {
	for _, seats := range []int{1, 2} {
		t.Run(fmt.Sprint(seats, " seats"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const hold = 10 * time.Millisecond
				h := newHarness(t, seatq.Config{Seats: seats})
				for i := range 50 {
					h.send(t.Context(), "heavy1", fmt.Sprint("h1-", i), hold)
					h.send(t.Context(), "heavy2", fmt.Sprint("h2-", i), hold)
				}
				before := len(h.servedSoFar())
				h.send(t.Context(), "light", "light", hold)
				for h.answer("light") == nil {
					time.Sleep(time.Millisecond)
				}
				if seats == 1 {
					// One seat hands over one request at a time, so the
					// order seated is exact.
					served := h.servedSoFar()
					at := slices.Index(served, "light")
					if others := at - before; others > 2 {
						t.Errorf("the light organization's request was seated after %d others' (%v), want at most 2: one per busier organization",
							others, served[before:at])
					}
				}
				if w, most := h.waitedFor("light"), time.Duration(2+seats)*hold/time.Duration(seats); w > most {
					t.Errorf("the light organization waited %s, want at most %s", w, most)
				}
				// Drain: every heavy request is answered in time and
				// the queue ends empty.
				time.Sleep(time.Duration(100/seats+1) * hold)
				synctest.Wait()
				for i := range 50 {
					for _, id := range []string{fmt.Sprint("h1-", i), fmt.Sprint("h2-", i)} {
						if a := h.answer(id); a == nil || a.Code != http.StatusOK {
							t.Fatalf("heavy request %s = %v, want 200", id, a)
						}
					}
				}
				h.empty()
			})
		})
	}
}

// TestAFullQueueAnswers429WithRetryAfterFromTheServiceRate: one seat,
// queues of 3. Four requests held 2 s each (the bubble's clock) set the
// observed hold to 2 s. Then with the seat taken and a's queue full, a's
// next request is refused at once, 429, with Retry-After computed from
// the service rate: 4 requests of a to serve (3 waiting and itself) × 1
// organization taking turns × 2 s / 1 seat = 8 s. Once b waits too, the
// turns are 2: 16 s. b itself is not refused: the bound is per
// organization.
func TestAFullQueueAnswers429WithRetryAfterFromTheServiceRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, seatq.Config{Seats: 1, QueueLength: 3})
		for i := range 4 {
			h.send(t.Context(), "a", fmt.Sprint("warm", i), 2*time.Second)
		}
		time.Sleep(8 * time.Second)
		synctest.Wait()
		h.send(t.Context(), "a", "holder", 0)
		for i := range 3 {
			h.send(t.Context(), "a", fmt.Sprint("a", i), 0)
		}
		h.send(t.Context(), "a", "over", 0)
		res := h.answer("over")
		if res == nil || res.Code != http.StatusTooManyRequests || res.Header().Get("Retry-After") != "8" {
			t.Fatalf("a's request beyond its queue of 3 = %+v, want 429 at once with Retry-After 8", res)
		}
		if w := h.waitedFor("over"); w != 0 {
			t.Errorf("the refused request waited %s, want 0: refused at once", w)
		}
		h.send(t.Context(), "b", "b0", 0)
		if h.answer("b0") != nil {
			t.Fatalf("b's first request was answered %d, want it queued", h.answer("b0").Code)
		}
		h.send(t.Context(), "a", "over2", 0)
		if res := h.answer("over2"); res == nil || res.Code != http.StatusTooManyRequests || res.Header().Get("Retry-After") != "16" {
			t.Fatalf("a's request beyond its queue with b waiting too = %+v, want 429 with Retry-After 16", res)
		}
		for _, id := range []string{"holder", "a0", "b0", "a1", "a2"} {
			h.let(id)
		}
		h.empty()
	})
}

// TestAWaitBeyondMaxWaitAnswers429: a request that waits MaxWait without
// a seat leaves the queue at that moment (the bubble's clock), 429 with
// a computed Retry-After, and holds nothing; the next request is seated
// at once when the seat frees.
func TestAWaitBeyondMaxWaitAnswers429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, seatq.Config{Seats: 1, MaxWait: 5 * time.Second})
		h.send(t.Context(), "a", "warm", 3*time.Second)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		h.send(t.Context(), "a", "holder", 0)
		h.send(t.Context(), "b", "late", 0)
		time.Sleep(5*time.Second - time.Nanosecond)
		synctest.Wait()
		if h.answer("late") != nil {
			t.Fatalf("answered before MaxWait: %d", h.answer("late").Code)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		// 1 request × 1 flow × 3 s / 1 seat.
		if res := h.answer("late"); res == nil || res.Code != http.StatusTooManyRequests || res.Header().Get("Retry-After") != "3" {
			t.Fatalf("a request past MaxWait = %+v, want 429 with Retry-After 3", res)
		}
		if st := h.q.Stats(10); st.InUse != 1 || st.Queued != 0 || st.FlowsTotal != 1 {
			t.Errorf("after the refusal: %+v, want the holder's seat alone", st)
		}
		h.let("holder")
		h.send(t.Context(), "b", "next", 0)
		if w := h.waitedFor("next"); w != 0 {
			t.Errorf("next request waited %s on a free seat", w)
		}
		h.let("next")
		h.empty()
	})
}

// TestACancelledRequestLeavesTheQueueAtOnce: of three requests queued
// behind the one seat, the middle one's client goes away: it leaves the
// queue at once (no time passes), is never seated, and the seat goes on
// to the others; afterwards the queue holds nothing.
func TestACancelledRequestLeavesTheQueueAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, seatq.Config{Seats: 1})
		h.send(t.Context(), "a", "holder", 0)
		ctx, cancel := context.WithCancel(t.Context())
		h.send(t.Context(), "a", "first", 0)
		h.send(ctx, "b", "gone", 0)
		h.send(t.Context(), "c", "last", 0)
		began := time.Now()
		cancel()
		synctest.Wait()
		if res := h.answer("gone"); res == nil || res.Code != 499 || time.Since(began) != 0 {
			t.Fatalf("the cancelled request = %+v after %s, want it out at once", res, time.Since(began))
		}
		if st := h.q.Stats(10); st.InUse != 1 || st.Queued != 2 || st.Waiting != 2 || st.FlowsTotal != 2 {
			t.Errorf("after the cancel: %+v, want 1 in use, 2 queued of 2 flows (b forgotten)", st)
		}
		h.let("holder")
		h.let("first")
		h.let("last")
		if got := fmt.Sprint(h.servedSoFar()); got != "[holder first last]" {
			t.Errorf("seated %s, want [holder first last]", got)
		}
		h.empty()
	})
}

// TestIdleGivesTheSeatUpAndResumesFirstInItsFlow: a seated request that
// goes idle frees its seat for another at once; resuming, it waits for a
// seat at the head of its organization's queue (ahead of its own
// organization's older requests, not of other organizations' turns), and
// holds it again until released.
func TestIdleGivesTheSeatUpAndResumesFirstInItsFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := mustNew(t, seatq.Config{Seats: 1})
		a := seatq.Flow{Kind: seatq.KindOrganization, Name: "a"}
		seat, err := q.Acquire(t.Context(), a, 1)
		if err != nil {
			t.Fatal(err)
		}
		ctx := seatq.NewContext(t.Context(), seat)
		var order []string
		var mu sync.Mutex
		queue := func(name string, f seatq.Flow) {
			go func() {
				s, err := q.Acquire(t.Context(), f, 1)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				time.Sleep(time.Second)
				s.Release()
			}()
			synctest.Wait()
		}
		queue("a-older", a)
		resume := seatq.Idle(ctx)
		synctest.Wait()
		if st := q.Stats(0); st.InUse != 1 || st.Queued != 0 {
			t.Fatalf("after Idle: %+v, want the seat given to a-older", st)
		}
		queue("b", seatq.Flow{Kind: seatq.KindOrganization, Name: "b"})
		queue("a-newer", a)
		if err := resume(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := fmt.Sprint(order)
		mu.Unlock()
		// b began to wait before a did again, so b's turn came first;
		// then a's, whose head was the resume, ahead of a-newer.
		if got != "[a-older b]" {
			t.Errorf("seated before the resume: %s, want [a-older b]", got)
		}
		if st := q.Stats(0); st.InUse != 1 || st.Queued != 1 {
			t.Errorf("after the resume: %+v, want the resumed seat and a-newer waiting", st)
		}
		seatq.Idle(seatq.NewContext(t.Context(), nil))() // no seat: nothing to do
		seat.Release()
		seat.Release() // twice: nothing more
		time.Sleep(3 * time.Second)
		synctest.Wait()
		mu.Lock()
		got = fmt.Sprint(order)
		mu.Unlock()
		if got != "[a-older b a-newer]" {
			t.Errorf("seated %s, want [a-older b a-newer]", got)
		}
		if st := q.Stats(10); st.InUse != 0 || st.Queued != 0 || st.FlowsTotal != 0 {
			t.Errorf("at rest: %+v", st)
		}
	})
}

// TestRefusalsAndWaitsAreObserved: the observer hears of every outcome,
// with the time waited by the bubble's clock.
func TestRefusalsAndWaitsAreObserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &recorder{}
		q := mustNew(t, seatq.Config{Seats: 1, QueueLength: 1, MaxWait: time.Second, Observer: obs})
		p := seatq.Flow{Kind: seatq.KindProvider, Name: "acme"}
		seat, err := q.Acquire(t.Context(), p, 1)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 2)
		go func() { _, err := q.Acquire(t.Context(), p, 1); done <- err }()
		synctest.Wait()
		if _, err := q.Acquire(t.Context(), p, 1); !errors.Is(err, seatq.ErrQueueFull) {
			t.Errorf("beyond the queue: %v, want ErrQueueFull", err)
		}
		time.Sleep(time.Second)
		if err := <-done; !errors.Is(err, seatq.ErrWaitTimeout) {
			t.Errorf("past MaxWait: %v, want ErrWaitTimeout", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			s, err := q.Acquire(ctx, p, 1)
			if err == nil {
				s.Release()
			}
			done <- err
		}()
		synctest.Wait()
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled: %v", err)
		}
		seat.Release()
		want := "[provider seated 0s provider queue_full 0s provider wait_timeout 1s provider gone 300ms]"
		if got := fmt.Sprint(obs.get()); got != want {
			t.Errorf("observed %s, want %s", got, want)
		}
	})
}

type recorder struct {
	mu  sync.Mutex
	got []any
}

func (r *recorder) ObserveSeat(k seatq.Kind, o seatq.Outcome, waited time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, k, o, waited)
}

func (r *recorder) get() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.got...)
}

// TestSeatsAreNeverOverdrawnUnderRacingCancels races many goroutines of
// several flows, a third of them cancelling at random moments and a few
// timing out, against real time: at no moment are more requests seated
// than there are seats, every request ends seated or refused or gone, and
// afterwards the queue holds nothing (run under -race).
func TestSeatsAreNeverOverdrawnUnderRacingCancels(t *testing.T) {
	t.Parallel()
	const seats = 4
	q := mustNew(t, seatq.Config{Seats: seats, QueueLength: 40, MaxWait: 50 * time.Millisecond})
	var seated, peak, wide, widePeak, served, refused, gone atomic.Int64
	bump := func(peak *atomic.Int64, n int64) {
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
	}
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			f := seatq.Flow{Kind: seatq.KindOrganization, Name: fmt.Sprint(g % 5)}
			for range 50 {
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(3) == 0 {
					time.AfterFunc(time.Duration(rng.IntN(200))*time.Microsecond, cancel)
				}
				s, err := q.Acquire(ctx, f, 1+rng.IntN(2))
				var refusal *seatq.Refusal
				switch {
				case err == nil:
					width := int64(s.Width())
					// hold counts the seats held (n = 1) or given back (n = -1).
					hold := func(n int64) {
						bump(&peak, seated.Add(n*width))
						if width > 1 {
							bump(&widePeak, wide.Add(n*width))
						}
					}
					hold(1)
					// Some cost more than they took: their flows owe.
					s.Charge(rng.IntN(4))
					if rng.IntN(4) == 0 {
						hold(-1)
						resume := seatq.Idle(seatq.NewContext(ctx, s))
						if resume() == nil {
							hold(1)
						} else {
							cancel()
							continue
						}
					}
					time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
					hold(-1)
					s.Release()
					served.Add(1)
				case errors.As(err, &refusal):
					refused.Add(1)
				case errors.Is(err, context.Canceled):
					gone.Add(1)
				default:
					t.Errorf("Acquire: %v", err)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > seats {
		t.Errorf("%d seats taken at once, with %d seats", p, seats)
	}
	if p, share := widePeak.Load(), int64(q.WideSeats()); p > share || p == 0 {
		t.Errorf("wide requests held %d seats at most at once; want some, and at most the share of %d", p, share)
	}
	if served.Load() == 0 {
		t.Error("nothing was served")
	}
	if st := q.Stats(10); st.InUse != 0 || st.Queued != 0 || st.Waiting != 0 || st.FlowsTotal != 0 {
		t.Errorf("after the race: %+v, want nothing in use, queued or remembered", st)
	}
	t.Logf("served %d, refused %d, gone %d", served.Load(), refused.Load(), gone.Load())
}

func TestNewRefusesOutOfRangeSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  seatq.Config
		want string
	}{
		{seatq.Config{Seats: -1}, "Config.Seats"},
		{seatq.Config{Seats: seatq.MaxSeats + 1}, "Config.Seats"},
		{seatq.Config{QueueLength: -1}, "Config.QueueLength"},
		{seatq.Config{MaxWait: -time.Second}, "Config.MaxWait"},
		{seatq.Config{MaxWait: seatq.MaxMaxWait + 1}, "Config.MaxWait"},
		{seatq.Config{WideSeats: -1}, "Config.WideSeats"},
		{seatq.Config{Seats: 4, WideSeats: 5}, "Config.WideSeats"},
		{seatq.Config{WideSeats: seatq.DefaultSeats + 1}, "Config.WideSeats"}, // more than the default seats
	} {
		if _, err := seatq.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	q := mustNew(t, seatq.Config{})
	if q.Seats() != seatq.DefaultSeats || q.QueueLength() != seatq.DefaultQueueLength || q.MaxWait() != seatq.DefaultMaxWait ||
		q.WideSeats() != seatq.DefaultSeats/2 {
		t.Errorf("defaults = %d, %d, %s, %d", q.Seats(), q.QueueLength(), q.MaxWait(), q.WideSeats())
	}
}

// TestAResumeIsRefusedByNeitherBound: a request that gave its seat up to
// wait takes one again even with its flow's queue full, and however long
// it waits (here five times MaxWait), since it was admitted once; a new
// request in the same queue is still refused at MaxWait.
func TestAResumeIsRefusedByNeitherBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := mustNew(t, seatq.Config{Seats: 1, QueueLength: 1, MaxWait: time.Second})
		a, b := seatq.Flow{Kind: seatq.KindOrganization, Name: "a"}, seatq.Flow{Kind: seatq.KindOrganization, Name: "b"}
		seat, err := q.Acquire(t.Context(), a, 1)
		if err != nil {
			t.Fatal(err)
		}
		resume := seatq.Idle(seatq.NewContext(t.Context(), seat))
		other, err := q.Acquire(t.Context(), b, 1)
		if err != nil {
			t.Fatal(err)
		}
		newer := make(chan error, 1)
		go func() { _, err := q.Acquire(t.Context(), a, 1); newer <- err }() // a's queue is full now
		synctest.Wait()
		resumed := make(chan error, 1)
		began := time.Now()
		go func() { resumed <- resume() }()
		time.Sleep(5 * time.Second)
		if err := <-newer; !errors.Is(err, seatq.ErrWaitTimeout) {
			t.Errorf("a new request past MaxWait: %v, want ErrWaitTimeout", err)
		}
		select {
		case err := <-resumed:
			t.Fatalf("the resume ended (%v) while the seat was taken", err)
		default:
		}
		other.Release()
		if err := <-resumed; err != nil || time.Since(began) != 5*time.Second {
			t.Fatalf("resume = %v after %s, want a seat once it freed, at 5s", err, time.Since(began))
		}
		seat.Release()
		if st := q.Stats(10); st.InUse != 0 || st.FlowsTotal != 0 {
			t.Errorf("at rest: %+v", st)
		}
	})
}

// TestAWideRequestTakesItsSeatsInTurnAndIsNotOvertaken: on 8 seats with
// five taken, a request of width 4 waits; a narrow request of another
// organization arriving after it waits too, though 3 seats are free (it
// would overtake the wide one's turn); when a seat frees the wide
// request takes its four, and the narrow one follows. Had the wide one's
// client gone instead, the narrow one would be seated at once.
func TestAWideRequestTakesItsSeatsInTurnAndIsNotOvertaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := mustNew(t, seatq.Config{Seats: 8})
		flow := func(name string) seatq.Flow { return seatq.Flow{Kind: seatq.KindOrganization, Name: name} }
		type result struct {
			seat *seatq.Seat
			err  error
		}
		acquire := func(ctx context.Context, name string, width int) chan result {
			ch := make(chan result, 1)
			go func() { s, err := q.Acquire(ctx, flow(name), width); ch <- result{s, err} }()
			synctest.Wait()
			return ch
		}
		seated := func(ch chan result) *seatq.Seat {
			select {
			case r := <-ch:
				if r.err != nil {
					t.Fatal(r.err)
				}
				return r.seat
			default:
				return nil
			}
		}
		holdFive := func() (held []*seatq.Seat) {
			for range 5 {
				held = append(held, seated(acquire(t.Context(), "a", 1)))
			}
			return held
		}
		held := holdFive()
		wide := acquire(t.Context(), "wide", 4)
		narrow := acquire(t.Context(), "narrow", 1)
		if seated(wide) != nil || seated(narrow) != nil {
			t.Fatalf("seated before the seat freed: %+v", q.Stats(10))
		}
		if st := q.Stats(0); st.InUse != 5 || st.Queued != 2 {
			t.Fatalf("stats %+v, want 5 seats in use and 2 waiting", st)
		}
		held[0].Release()
		synctest.Wait()
		w := seated(wide)
		if w == nil || seated(narrow) != nil || q.Stats(0).InUse != 8 {
			t.Fatalf("after the release: wide %v, stats %+v; want the wide request on 4 seats, the narrow one waiting", w, q.Stats(10))
		}
		w.Release()
		synctest.Wait()
		if n := seated(narrow); n == nil {
			t.Fatal("the narrow request was not seated after the wide one")
		} else {
			n.Release()
		}

		for _, h := range held[1:] {
			h.Release()
		}
		held = holdFive()
		ctx, cancel := context.WithCancel(t.Context())
		gone := acquire(ctx, "wide", 4)
		narrow = acquire(t.Context(), "narrow", 1)
		cancel()
		synctest.Wait()
		if r := <-gone; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("the cancelled wide request: %v", r.err)
		}
		n := seated(narrow)
		if n == nil {
			t.Fatalf("the narrow request was not seated once the wide one before it left: %+v", q.Stats(10))
		}
		n.Release()
		for _, h := range held {
			h.Release()
		}
		if st := q.Stats(10); st.InUse != 0 || st.Queued != 0 || st.FlowsTotal != 0 {
			t.Errorf("at rest: %+v", st)
		}
	})
}

// TestWideRequestsHoldAtMostHalfTheSeats: on 16 seats, a flow that sends
// five requests of width 8 has one seated and four waiting, the wide share
// being taken; a narrow request of another flow, arriving behind them in
// the round, is seated at once on the seats the share leaves, and so are
// seven more. When the wide request ends, the next one takes the share.
func TestWideRequestsHoldAtMostHalfTheSeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := mustNew(t, seatq.Config{Seats: 16})
		if q.WideSeats() != 8 {
			t.Fatalf("WideSeats = %d, want 8", q.WideSeats())
		}
		heavy := seatq.Flow{Kind: seatq.KindOrganization, Name: "heavy"}
		light := seatq.Flow{Kind: seatq.KindOrganization, Name: "light"}
		seats := make(chan *seatq.Seat, 5)
		for range 5 {
			go func() {
				s, err := q.Acquire(t.Context(), heavy, 8)
				if err != nil {
					t.Error(err)
				}
				seats <- s
			}()
		}
		synctest.Wait()
		if st := q.Stats(0); st.InUse != 8 || st.Queued != 4 {
			t.Fatalf("five wide requests: %+v, want one seated on 8 seats and four waiting", st)
		}
		var narrow []*seatq.Seat
		for range 8 {
			s, err := q.Acquire(t.Context(), light, 1)
			if err != nil {
				t.Fatal(err)
			}
			narrow = append(narrow, s)
		}
		if st := q.Stats(0); st.InUse != 16 || st.Queued != 4 {
			t.Fatalf("eight narrow requests beside: %+v, want all 16 seats in use, four wide waiting", st)
		}
		for _, s := range narrow {
			s.Release()
		}
		(<-seats).Release()
		synctest.Wait()
		if st := q.Stats(0); st.InUse != 8 || st.Queued != 3 {
			t.Fatalf("after the first wide request: %+v, want the next on the share, three waiting", st)
		}
		for range 4 {
			(<-seats).Release()
			synctest.Wait()
		}
		if st := q.Stats(10); st.InUse != 0 || st.Queued != 0 || st.FlowsTotal != 0 {
			t.Errorf("at rest: %+v", st)
		}
	})
}

// TestACostlyRequestsFlowPaysOnItsNextRequests: a request that took one
// seat and cost eight leaves its flow owing seven, which its next request
// takes on top of its one; another flow's requests owe nothing. The debt
// is paid once; a request that leaves the queue unseated gives back what
// it took on.
func TestACostlyRequestsFlowPaysOnItsNextRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := mustNew(t, seatq.Config{Seats: 16})
		heavy := seatq.Flow{Kind: seatq.KindOrganization, Name: "heavy"}
		light := seatq.Flow{Kind: seatq.KindOrganization, Name: "light"}
		acquire := func(ctx context.Context, f seatq.Flow) *seatq.Seat {
			t.Helper()
			s, err := q.Acquire(ctx, f, 1)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		// The flow lives while one of its requests is served.
		keep := acquire(t.Context(), heavy)
		costly := acquire(t.Context(), heavy)
		costly.Charge(8)
		costly.Release()
		owing := acquire(t.Context(), heavy)
		if owing.Width() != 8 {
			t.Fatalf("the next request of the flow takes %d seats, want 1 + 7 owed", owing.Width())
		}
		if l := acquire(t.Context(), light); l.Width() != 1 {
			t.Errorf("another flow's request takes %d seats, want 1", l.Width())
		} else {
			l.Release()
		}
		owing.Charge(1)
		owing.Release()
		if s := acquire(t.Context(), heavy); s.Width() != 1 {
			t.Errorf("after the debt was paid, a request takes %d seats, want 1", s.Width())
		} else {
			s.Release()
		}

		// Owed again; the request that takes the debt on waits behind a
		// wide request, and its client goes away: the debt stays owed.
		costly = acquire(t.Context(), heavy)
		costly.Charge(8)
		costly.Release()
		wide, err := q.Acquire(t.Context(), light, 8)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := q.Acquire(ctx, heavy, 1)
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("the waiting request: %v, want context.Canceled", err)
		}
		wide.Release()
		if s := acquire(t.Context(), heavy); s.Width() != 8 {
			t.Errorf("after an unseated request left, the next takes %d seats, want 8", s.Width())
		} else {
			s.Release()
		}
		keep.Release()
		if st := q.Stats(10); st.InUse != 0 || st.Queued != 0 || st.FlowsTotal != 0 {
			t.Errorf("at rest: %+v", st)
		}
	})
}

func TestBytesWidthIsASeatPer64KiBBegun(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want int
	}{
		{0, 1}, {17, 1}, {64 << 10, 1}, {64<<10 + 1, 2}, {200 << 10, 4}, {448 << 10, 7}, {448<<10 + 1, 8}, {4 << 20, 8}, {1 << 40, 8},
	} {
		if got := seatq.BytesWidth(tt.n); got != tt.want {
			t.Errorf("BytesWidth(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}
