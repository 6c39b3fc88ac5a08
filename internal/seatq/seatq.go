// Package seatq is a per-process fair queue of database seats shared by the
// API, the console and provider callbacks, after Kubernetes API Priority and
// Fairness with one priority level; see docs/seat-queue.md.
//
// Acquire seats at once when seats are free and nobody waits; otherwise
// requests wait FIFO per [Flow] and flows are served round robin, nobody
// overtaking the request whose turn it is. Wide requests together hold at
// most [Config.WideSeats]. Waits are bounded per flow and in time (a
// [*Refusal]); [Idle] gives a seat up for a wait off the database.
package seatq

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of [Config].
const (
	// DefaultSeats is the default [Config.Seats]: the default size of
	// cmd/searchd's database pool, which derives its seats from the pool
	// it opens.
	DefaultSeats = 16
	// DefaultQueueLength is the default [Config.QueueLength]: room for a
	// burst of hundreds of requests from one flow on a server whose seats
	// are all taken (a batch job's clients, many tabs, hundreds of starts
	// of one key waiting with Prefer: wait), which the seats serve in
	// well under a second, so that honest bursts are queued, not
	// refused. A waiting request costs a goroutine and its connection's
	// buffers (and the API reads at most 16 KiB of its body ahead), so
	// a full queue is a few MiB.
	DefaultQueueLength = 512
	// DefaultMaxWait is the default [Config.MaxWait]. A seat frees every
	// few milliseconds on a healthy database, so a request that has
	// waited this long is behind a database in trouble or a backlog it
	// would not clear in time; its client is better told when to retry.
	DefaultMaxWait = 10 * time.Second
)

// Limits of [Config], checked by [New].
const (
	MaxSeats       = 10000
	MaxQueueLength = 100000
	MaxMaxWait     = 5 * time.Minute
)

// Bounds of a [Refusal]'s RetryAfter.
const (
	minRetryAfter = time.Second
	maxRetryAfter = time.Minute
)

// holdWeight: the newest hold time weighs 1/16 in the moving average.
const holdWeight = 16

// Kind is what a [Flow] is.
type Kind uint8

// The kinds of flow.
const (
	// KindOrganization: an organization's API and console requests.
	KindOrganization Kind = iota + 1
	// KindOperator: one operator's console pages (the token's sub).
	KindOperator
	// KindProvider: one provider's signed callbacks.
	KindProvider
)

// Kinds returns every [Kind], in order.
func Kinds() []Kind { return []Kind{KindOrganization, KindOperator, KindProvider} }

// String returns organization, operator or provider.
func (k Kind) String() string { return name(k, "organization", "operator", "provider") }

func name[T ~uint8](i T, names ...string) string {
	if i < 1 || int(i) > len(names) {
		return "unknown"
	}
	return names[i-1]
}

// Flow is the unit of fairness: requests of one flow share a queue, flows
// take turns.
type Flow struct {
	Kind Kind
	// Name is the organization's id, the operator's sub or the provider's name.
	Name string
}

// String returns "kind name".
func (f Flow) String() string { return f.Kind.String() + " " + f.Name }

// Config configures a [Queue]; the zero value is the defaults.
type Config struct {
	// Seats is how many requests are served at once, 1 to [MaxSeats].
	// Zero is [DefaultSeats]; cmd/searchd gives the size of its database
	// pool, so that a seated request rarely waits for a connection.
	Seats int
	// QueueLength is how many requests of one flow may wait for a seat,
	// 1 to [MaxQueueLength]; one more is refused. Zero is
	// [DefaultQueueLength].
	QueueLength int
	// MaxWait is how long a request may wait for a seat, above zero and
	// at most [MaxMaxWait]; then it is refused. Zero is [DefaultMaxWait].
	MaxWait time.Duration
	// WideSeats is how many seats wide requests (of more than one seat)
	// may hold together, 1 to Seats (to [MaxSeats] while Seats is zero,
	// which the caller or New sizes later); it is also the widest a
	// request can be. Zero is half the seats (at least one). cmd/searchd
	// gives at most twice the processors: wide requests are the
	// processor-bound ones.
	WideSeats int
	// Observer is told how each request's wait ended; nil tells nobody.
	Observer Observer
}

// MaxWidth is the most seats one request takes.
const MaxWidth = 8

// BytesPerSeat is how many bytes read or rendered one seat stands for.
const BytesPerSeat = 64 << 10

// BytesWidth returns the seats n bytes stand for: one per [BytesPerSeat]
// begun, 1 to [MaxWidth].
func BytesWidth(n int64) int {
	return int(min(max((n+BytesPerSeat-1)/BytesPerSeat, 1), MaxWidth))
}

// Observer is told how each wait for a seat ended, once per Acquire and per
// resume after [Idle]. It is called outside the queue's lock and must not
// block.
type Observer interface {
	ObserveSeat(kind Kind, outcome Outcome, waited time.Duration)
}

// Outcome is how a wait for a seat ended.
type Outcome uint8

// The outcomes.
const (
	// Seated: the request got a seat (waited is zero if one was free).
	Seated Outcome = iota + 1
	// QueueFull: refused at once; its flow's queue was full.
	QueueFull
	// WaitTimeout: refused after waiting [Config.MaxWait].
	WaitTimeout
	// Gone: the request's context ended while it waited.
	Gone
)

// String returns seated, queue_full, wait_timeout or gone.
func (o Outcome) String() string { return name(o, "seated", "queue_full", "wait_timeout", "gone") }

// The reasons of a [Refusal], for errors.Is.
var (
	// ErrQueueFull: the flow had [Config.QueueLength] requests waiting.
	ErrQueueFull = errors.New("seatq: the flow's queue is full")
	// ErrWaitTimeout: no seat came within [Config.MaxWait].
	ErrWaitTimeout = errors.New("seatq: no seat within the longest wait")
)

// Refusal is the error of a request refused a seat; errors.Is matches its
// Reason, [ErrQueueFull] or [ErrWaitTimeout]. RetryAfter estimates when it
// would be served: the flow's waiters times the waiting flows times the
// mean hold time, divided by the seats, clamped to one second to a minute.
type Refusal struct {
	Reason      error
	Flow        Flow
	RetryAfter  time.Duration
	QueueLength int
	MaxWait     time.Duration
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%v (%s; retry after %s)", r.Reason, r.Flow, r.RetryAfter)
}

func (r *Refusal) Unwrap() error { return r.Reason }

// Queue is one process's seat queue. It is safe for concurrent use.
type Queue struct {
	cfg Config // with its defaults

	mu     sync.Mutex
	inUse  int
	queued int
	flows  map[Flow]*flow
	// round holds the flows with waiters, in serving order.
	round list.List
	// wideInUse is what wide requests hold of their share, cfg.WideSeats.
	wideInUse int
	meanHold  time.Duration
}

type flow struct {
	key   Flow
	inUse int
	// debt is the extra seats its next requests take, at most maxDebt.
	debt int
	// waiting is oldest first; resumes go first.
	waiting list.List
	inRound *list.Element
}

type waiter struct {
	seat   *Seat
	since  time.Time
	elem   *list.Element
	ready  chan struct{}
	seated bool
}

// Seat is the seats a request holds. Its methods are for the request's own
// goroutine.
type Seat struct {
	q *Queue
	f *flow
	// paid is the part of width taken from the flow's debt.
	asked, width, paid, cost int
	since                    time.Time
	// held is false after Release and while idle. Guarded by q.mu.
	held bool
	ctx  seatContext
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Seats = cmp.Or(c.Seats, DefaultSeats)
	c.QueueLength = cmp.Or(c.QueueLength, DefaultQueueLength)
	c.MaxWait = cmp.Or(c.MaxWait, DefaultMaxWait)
	c.WideSeats = cmp.Or(c.WideSeats, max(c.Seats/2, 1))
	return c
}

// Validate returns an error naming the first field out of range, with its
// defaults: "seatq: Config.F is V; it must be R".
func (c Config) Validate() error {
	seats := cmp.Or(c.Seats, MaxSeats)
	c = c.WithDefaults()
	switch {
	case c.Seats < 1 || c.Seats > MaxSeats:
		return fmt.Errorf("seatq: Config.Seats is %d; it must be from 1 to %d", c.Seats, MaxSeats)
	case c.QueueLength < 1 || c.QueueLength > MaxQueueLength:
		return fmt.Errorf("seatq: Config.QueueLength is %d; it must be from 1 to %d", c.QueueLength, MaxQueueLength)
	case c.WideSeats < 1 || c.WideSeats > seats:
		return fmt.Errorf("seatq: Config.WideSeats is %d; it must be from 1 to the seats, at most %d", c.WideSeats, seats)
	case c.MaxWait <= 0 || c.MaxWait > MaxMaxWait:
		return fmt.Errorf("seatq: Config.MaxWait is %s; it must be more than 0s and at most %s", c.MaxWait, MaxMaxWait)
	}
	return nil
}

// New returns a queue configured by cfg, or [Config.Validate]'s error.
func New(cfg Config) (*Queue, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Queue{cfg: cfg, flows: map[Flow]*flow{}}, nil
}

// Seats returns how many requests the queue serves at once.
func (q *Queue) Seats() int { return q.cfg.Seats }

// WideSeats returns [Config.WideSeats], also the widest a request can be.
func (q *Queue) WideSeats() int { return q.cfg.WideSeats }

// QueueLength returns how many requests of one flow may wait.
func (q *Queue) QueueLength() int { return q.cfg.QueueLength }

// MaxWait returns how long a request may wait for a seat.
func (q *Queue) MaxWait() time.Duration { return q.cfg.MaxWait }

// Acquire seats a request of f with width seats plus f's debt, clamped to
// 1..[MaxWidth] and [Queue.WideSeats]: at once if they are free and nobody
// waits ahead, else when f's turn comes. The caller must Release the seat.
// It returns a [*Refusal] when f's queue is full or the wait times out, or
// ctx's error; the request then holds no seat and f's debt is unchanged.
func (q *Queue) Acquire(ctx context.Context, f Flow, width int) (*Seat, error) {
	s := &Seat{q: q, asked: min(max(width, 1), MaxWidth, q.cfg.WideSeats)}
	if err := q.take(ctx, s, f, false); err != nil {
		return nil, err
	}
	return s, nil
}

// take seats s, waiting at the back of its flow's queue, or at the front when resuming.
func (q *Queue) take(ctx context.Context, s *Seat, key Flow, resume bool) error {
	if err := ctx.Err(); err != nil {
		return err // gone already: no seat for nobody
	}
	q.mu.Lock()
	f := q.flowLocked(s, key)
	if !resume {
		s.width = min(s.asked+f.debt, MaxWidth, q.cfg.WideSeats)
		s.paid = s.width - s.asked
		f.debt -= s.paid
	}
	// Nobody overtakes the request whose turn it is.
	if q.round.Len() == 0 && q.fitsLocked(s.width) {
		q.seatLocked(f, s)
		q.mu.Unlock()
		q.observe(f.key.Kind, Seated, 0)
		return nil
	}
	if !resume && f.waiting.Len() >= q.cfg.QueueLength {
		err := q.refusalLocked(f, ErrQueueFull)
		q.repayLocked(s)
		q.forgetLocked(f)
		q.mu.Unlock()
		q.observe(f.key.Kind, QueueFull, 0)
		return err
	}
	w := &waiter{seat: s, since: time.Now(), ready: make(chan struct{})}
	if resume {
		w.elem = f.waiting.PushFront(w)
	} else {
		w.elem = f.waiting.PushBack(w)
	}
	if f.inRound == nil {
		f.inRound = q.round.PushBack(f)
	}
	q.queued++
	q.dispatchLocked()
	seated := w.seated
	q.mu.Unlock()
	if seated {
		q.observe(f.key.Kind, Seated, 0)
		return nil
	}

	// A resume has no timeout: the request was admitted once.
	var timeout <-chan time.Time
	if !resume {
		timer := time.NewTimer(q.cfg.MaxWait)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case <-w.ready:
		q.observe(f.key.Kind, Seated, time.Since(w.since))
		return nil
	case <-ctx.Done():
		return q.leave(w, ctx.Err())
	case <-timeout:
		return q.leave(w, ErrWaitTimeout)
	}
}

// flowLocked sets and returns s's flow, restoring or creating it in q.flows.
func (q *Queue) flowLocked(s *Seat, key Flow) *flow {
	if s.f != nil {
		key = s.f.key
		if q.flows[key] == nil {
			q.flows[key] = s.f
		}
	} else if q.flows[key] == nil {
		q.flows[key] = &flow{key: key}
	}
	s.f = q.flows[key]
	return s.f
}

// leave removes w from its queue after its wait ended for why. A seat granted
// meanwhile is kept on timeout and given back when the request is gone.
func (q *Queue) leave(w *waiter, why error) error {
	s := w.seat
	f := s.f
	q.mu.Lock()
	if w.seated {
		if why == ErrWaitTimeout {
			q.mu.Unlock()
			q.observe(f.key.Kind, Seated, time.Since(w.since))
			return nil
		}
		q.releaseLocked(s)
		q.mu.Unlock()
		q.observe(f.key.Kind, Gone, time.Since(w.since))
		return why
	}
	q.dequeueLocked(f, w)
	q.repayLocked(s)
	q.dispatchLocked()
	err, outcome := why, Gone
	if why == ErrWaitTimeout {
		err, outcome = q.refusalLocked(f, ErrWaitTimeout), WaitTimeout
	}
	q.forgetLocked(f)
	q.mu.Unlock()
	q.observe(f.key.Kind, outcome, time.Since(w.since))
	return err
}

func (q *Queue) refusalLocked(f *flow, reason error) *Refusal {
	turns := q.round.Len()
	if f.inRound == nil {
		turns++ // the flow would join the round
	}
	backlog := f.waiting.Len() + 1
	est := float64(backlog) * float64(turns) * float64(q.meanHold) / float64(q.cfg.Seats)
	after := maxRetryAfter
	if est < float64(maxRetryAfter) {
		after = max(time.Duration(est), minRetryAfter)
	}
	return &Refusal{Reason: reason, Flow: f.key, RetryAfter: after,
		QueueLength: q.cfg.QueueLength, MaxWait: q.cfg.MaxWait}
}

// Release gives the seat to the next waiting request, or frees it. It does
// nothing for a released seat, or one given up by Idle and not retaken.
func (s *Seat) Release() {
	q := s.q
	q.mu.Lock()
	q.releaseLocked(s)
	q.mu.Unlock()
}

// Flow returns the flow the seat is charged to.
func (s *Seat) Flow() Flow { return s.f.key }

func (q *Queue) releaseLocked(s *Seat) {
	if !s.held {
		return
	}
	s.held = false
	hold := time.Since(s.since)
	if q.meanHold == 0 {
		q.meanHold = hold
	} else {
		q.meanHold += (hold - q.meanHold) / holdWeight
	}
	s.f.inUse -= s.width
	q.inUse -= s.width
	if s.width > 1 {
		q.wideInUse -= s.width
	}
	if s.cost > s.width {
		s.f.debt = min(s.f.debt+s.cost-s.width, maxDebt)
	}
	s.cost = 0
	q.dispatchLocked()
	q.forgetLocked(s.f)
}

// maxDebt is four of the widest requests.
const maxDebt = 4 * MaxWidth

// Charge reports the request's cost in seats; a cost above the seats taken
// becomes its flow's debt. The last call before [Seat.Release] counts.
func (s *Seat) Charge(cost int) {
	s.q.mu.Lock()
	s.cost = cost
	s.q.mu.Unlock()
}

// Width returns the seats the request holds (or held).
func (s *Seat) Width() int { return s.width }

func (q *Queue) repayLocked(s *Seat) {
	s.f.debt += s.paid
	s.paid = 0
}

func (q *Queue) fitsLocked(width int) bool {
	return q.inUse+width <= q.cfg.Seats && (width == 1 || q.wideInUse+width <= q.cfg.WideSeats)
}

func (q *Queue) seatLocked(f *flow, s *Seat) {
	q.inUse += s.width
	f.inUse += s.width
	if s.width > 1 {
		q.wideInUse += s.width
	}
	s.held, s.since, s.paid = true, time.Now(), 0
}

// dispatchLocked seats waiters in turn while they fit, stopping at the first
// that does not, except that a wide request blocked only by the wide share
// keeps its place and is skipped (narrow requests cannot delay it).
func (q *Queue) dispatchLocked() {
	for e := q.round.Front(); e != nil; {
		f := e.Value.(*flow)
		w := f.waiting.Front().Value.(*waiter)
		if w.seat.width > 1 && q.wideInUse+w.seat.width > q.cfg.WideSeats {
			e = e.Next() // waits for the wide share first
			continue
		}
		if q.inUse+w.seat.width > q.cfg.Seats {
			return
		}
		if q.dequeueLocked(f, w); f.inRound != nil {
			q.round.MoveToBack(f.inRound)
		}
		q.seatLocked(f, w.seat)
		w.seated = true
		close(w.ready)
		e = q.round.Front()
	}
}

// dequeueLocked removes w, and f from the round when nothing of it waits.
func (q *Queue) dequeueLocked(f *flow, w *waiter) {
	f.waiting.Remove(w.elem)
	q.queued--
	if f.waiting.Len() == 0 {
		q.round.Remove(f.inRound)
		f.inRound = nil
	}
}

func (q *Queue) forgetLocked(f *flow) {
	if f.inUse == 0 && f.waiting.Len() == 0 && q.flows[f.key] == f {
		delete(q.flows, f.key)
	}
}

func (q *Queue) observe(k Kind, o Outcome, waited time.Duration) {
	if q.cfg.Observer != nil {
		q.cfg.Observer.ObserveSeat(k, o, waited)
	}
}

type seatKey struct{}

type seatContext struct {
	context.Context
	seat *Seat
}

func (c *seatContext) Value(key any) any {
	if key == (seatKey{}) {
		return c.seat
	}
	return c.Context.Value(key)
}

// NewContext returns ctx carrying s for [Idle]; nil s carries none. Call it
// once per seat: the context is part of s.
func NewContext(ctx context.Context, s *Seat) context.Context {
	if s == nil {
		return ctx
	}
	s.ctx = seatContext{Context: ctx, seat: s}
	return &s.ctx
}

// FromContext returns the seat ctx carries, or nil.
func FromContext(ctx context.Context) *Seat {
	s, _ := ctx.Value(seatKey{}).(*Seat)
	return s
}

// Idle gives up ctx's seat, if any, for a wait off the database, and returns
// resume, which must retake a seat before the database is used again: at the
// head of the flow's queue, exempt from both bounds. resume returns ctx's
// error if ctx ends first.
func Idle(ctx context.Context) (resume func() error) {
	s := FromContext(ctx)
	if s == nil {
		return func() error { return nil }
	}
	q := s.q
	q.mu.Lock()
	wasHeld := s.held
	q.releaseLocked(s)
	q.mu.Unlock()
	if !wasHeld {
		return func() error { return nil }
	}
	return func() error { return q.take(ctx, s, s.f.key, true) }
}

// Stats is a snapshot of the queue.
type Stats struct {
	// InUse excludes idle seats.
	Seats, InUse int
	// Waiting counts the flows of the Queued requests.
	Queued, Waiting int
	MeanHold        time.Duration
	// Flows are the busy flows, most waiting first, then most seats.
	Flows      []FlowStats
	FlowsTotal int
}

// FlowStats is one flow's part of [Stats].
type FlowStats struct {
	Flow       Flow
	InUse      int
	Waiting    int
	OldestWait time.Duration
}

// Stats returns the queue's state with at most limit flows.
func (q *Queue) Stats(limit int) Stats {
	now := time.Now()
	q.mu.Lock()
	st := Stats{Seats: q.cfg.Seats, InUse: q.inUse, Queued: q.queued, Waiting: q.round.Len(),
		MeanHold: q.meanHold, FlowsTotal: len(q.flows)}
	if limit > 0 {
		st.Flows = make([]FlowStats, 0, min(limit, len(q.flows)))
		for _, f := range q.flows {
			fs := FlowStats{Flow: f.key, InUse: f.inUse, Waiting: f.waiting.Len()}
			for e := f.waiting.Front(); e != nil; e = e.Next() {
				fs.OldestWait = max(fs.OldestWait, now.Sub(e.Value.(*waiter).since))
			}
			st.Flows = append(st.Flows, fs)
		}
	}
	q.mu.Unlock()
	slices.SortFunc(st.Flows, func(a, b FlowStats) int {
		return cmp.Or(cmp.Compare(b.Waiting, a.Waiting), cmp.Compare(b.InUse, a.InUse),
			cmp.Compare(a.Flow.Kind, b.Flow.Kind), strings.Compare(a.Flow.Name, b.Flow.Name))
	})
	if len(st.Flows) > limit {
		st.Flows = st.Flows[:limit]
	}
	return st
}
