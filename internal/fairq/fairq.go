// Package fairq is searchd's admission control: one work-conserving fair
// queue per process in front of the database, through which every door
// passes (the /v1 API, the console's pages and actions, provider
// callbacks). Kubernetes API Priority and Fairness is the model: flows,
// seats, bounded queues and fair dispatch, here with one priority level.
//
// The contract:
//
//   - Capacity is a number of seats ([Config.Seats]), sized to what the
//     database pool can serve. A request holds its seats from a
//     successful [Queue.Acquire] until [Seat.Release]: one, or as many as
//     its width when the caller knows it to be heavier (a list of
//     hundreds of rows), as Priority and Fairness counts a large list.
//   - Charged for its cost (issue 36): a request that turns out to have
//     cost more seats than it took ([Seat.Charge], told before the
//     release: the bytes it read and rendered, say) leaves the excess to
//     its flow as a debt, which the flow's next requests pay by taking
//     that many seats more (up to [MaxWidth]) while the flow is being
//     served. A flow of costly requests thus takes the seats its work is
//     worth after its first few, whatever width its caller guessed.
//   - Wide requests (more than one seat) together hold at most a share
//     of the seats ([Config.WideSeats], by default half), so however many
//     a flow sends, the rest stays for narrow requests: a light request of another flow
//     runs beside at most that share of heavy work, and waits for no
//     heavy request to end. A wide request that waits only for that
//     share does not hold up the narrow requests behind it in the round
//     (narrow requests never take the share, so it is not starved).
//   - Work-conserving: while nobody waits and the seats a request needs
//     are free, Acquire seats it at once, whoever sends it, so one flow
//     alone may hold every seat.
//   - Fair: when the seats are taken, a request waits in its flow's FIFO
//     queue ([Flow]: an organization, an operator, a provider), and seats
//     that free go to the oldest request of the next flow in turn, once
//     there are as many free as it needs: round robin over the flows that
//     have requests waiting, a flow that begins to wait joining the end of
//     the round. A request therefore waits for at most one request per
//     flow waiting ahead of it in the round (and then for those ahead of
//     it in its own flow's queue), however many requests those flows have
//     queued. Nobody overtakes the request whose turn it is, so a wide
//     request is never starved by narrow ones.
//   - Bounded: a flow has at most [Config.QueueLength] requests waiting;
//     one more is refused at once ([ErrQueueFull]). A request waits at
//     most [Config.MaxWait]; then it leaves the queue, refused
//     ([ErrWaitTimeout]). A refusal is a [*Refusal] whose RetryAfter is
//     estimated from the observed service rate (see [Refusal]).
//   - A request whose context ends while it waits (its client went away)
//     leaves the queue at once and holds no seat: Acquire returns the
//     context's error.
//   - A seated request that waits for something other than the database
//     (a start with Prefer: wait, waiting for another request's claim to
//     end) gives its seat up for the wait with [Idle], and takes one again,
//     at the head of its flow's queue and exempt from both bounds (it was
//     admitted once), before it uses the database again.
//   - Nothing here touches the database, reads a request or does any
//     I/O: Acquire and Release are a mutex, a map and, for a request that
//     waits, a channel and a timer.
//
// The seats are per process: with replicas, each has its own.
package fairq

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

// The bounds of a [Refusal]'s RetryAfter: Retry-After is whole seconds,
// and a server that asks for more than a minute is telling its clients to
// go away, which no estimate of a queue should.
const (
	minRetryAfter = time.Second
	maxRetryAfter = time.Minute
)

// holdWeight is the weight of the newest seat's hold time in the moving
// average of hold times the Retry-After estimate divides by: one in
// sixteen, so the estimate follows a change of load within a few dozen
// requests without jumping at one slow request.
const holdWeight = 16

// Kind is what a [Flow] is.
type Kind uint8

// The kinds of flow.
const (
	// KindOrganization: an organization's requests, on the API and on the
	// console's auditor pages.
	KindOrganization Kind = iota + 1
	// KindOperator: one operator's console pages (the token's sub).
	KindOperator
	// KindProvider: one provider's signed callbacks.
	KindProvider
)

// Kinds are every [Kind], in order.
func Kinds() []Kind { return []Kind{KindOrganization, KindOperator, KindProvider} }

// String returns the kind's name: organization, operator or provider.
func (k Kind) String() string { return name(k, "organization", "operator", "provider") }

// name returns the name of the i-th (from 1) of names, or "unknown".
func name[T ~uint8](i T, names ...string) string {
	if i < 1 || int(i) > len(names) {
		return "unknown"
	}
	return names[i-1]
}

// Flow is who a request is charged to: the unit of fairness. Two requests
// of the same flow share its queue; requests of different flows take
// turns.
type Flow struct {
	Kind Kind
	// Name is the organization's id, the operator's sub or the
	// provider's name.
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
	// may hold together, 1 to Seats; it is also the widest a request can
	// be. Zero is half the seats (at least one). cmd/searchd gives at most
	// twice the processors: wide requests are the processor-bound ones.
	WideSeats int
	// Observer is told how each request's wait ended; nil tells nobody.
	Observer Observer
}

// MaxWidth is the most seats one request takes, whatever width it asks:
// half the default seats.
const MaxWidth = 8

// BytesPerSeat is the bytes a request reads or renders that one seat
// stands for in [BytesWidth]: a body is decoded, and an answer encoded,
// by the processor under the seat, at a cost that grows with its bytes,
// while a start, whose answer is a few KiB, mostly waits for two commits.
const BytesPerSeat = 64 << 10

// BytesWidth is the seats n bytes read or rendered stand for: one per
// [BytesPerSeat] begun, 1 to [MaxWidth] (a body or an answer of 448 KiB
// or more is as wide as a request can be).
func BytesWidth(n int64) int {
	return int(min(max((n+BytesPerSeat-1)/BytesPerSeat, 1), MaxWidth))
}

// Observer is told how each wait for a seat ended, one call per
// [Queue.Acquire] and per resume after [Idle] that returned. Its calls
// are made outside the queue's lock and must not block.
type Observer interface {
	ObserveAdmission(kind Kind, outcome Outcome, waited time.Duration)
}

// Outcome is how a wait for a seat ended.
type Outcome uint8

// The outcomes.
const (
	// Seated: the request got a seat (waited is zero when one was free).
	Seated Outcome = iota + 1
	// QueueFull: refused at once, its flow's queue being full.
	QueueFull
	// WaitTimeout: refused after waiting [Config.MaxWait].
	WaitTimeout
	// Gone: the request's context ended while it waited.
	Gone
)

// String returns the outcome's name: seated, queue_full, wait_timeout or
// gone.
func (o Outcome) String() string { return name(o, "seated", "queue_full", "wait_timeout", "gone") }

// The reasons of a [Refusal], to test with errors.Is.
var (
	// ErrQueueFull: the flow already had [Config.QueueLength] requests
	// waiting.
	ErrQueueFull = errors.New("fairq: the flow's queue is full")
	// ErrWaitTimeout: no seat came within [Config.MaxWait].
	ErrWaitTimeout = errors.New("fairq: no seat within the longest wait")
)

// Refusal is the error of a request refused a seat. Its Reason is
// [ErrQueueFull] or [ErrWaitTimeout] (errors.Is sees it).
//
// RetryAfter is when the refused request would likely be served: the time
// the flow's queue takes to drain at the rate seats are observed to free,
// that is the requests the flow has waiting, times the flows taking turns
// (the flow is served once per round), times the mean time a request
// holds its seat (a moving average of the requests served), divided by
// the seats. It is at least a second and at most a minute.
type Refusal struct {
	Reason     error
	Flow       Flow
	RetryAfter time.Duration
	// QueueLength and MaxWait are the queue's bounds, for the message.
	QueueLength int
	MaxWait     time.Duration
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%v (%s; retry after %s)", r.Reason, r.Flow, r.RetryAfter)
}

func (r *Refusal) Unwrap() error { return r.Reason }

// Queue is the admission queue of one process. It is safe for concurrent
// use.
type Queue struct {
	seats       int
	queueLength int
	maxWait     time.Duration
	obs         Observer

	mu     sync.Mutex
	inUse  int
	queued int
	// flows holds every flow with a seat in use or a request waiting,
	// and no other: its size is bounded by the requests being served or
	// queued.
	flows map[Flow]*flow
	// round holds the flows with requests waiting (*flow), in the order
	// they get the next seats.
	round list.List
	// wideSeats is the share of the seats wide requests may hold
	// together; wideInUse what they hold.
	wideSeats, wideInUse int
	// meanHold is the moving average of how long a request holds its
	// seat; zero until one was released.
	meanHold time.Duration
}

// flow is the state of one [Flow].
type flow struct {
	key   Flow
	inUse int
	// debt is the seats its requests cost beyond those they took (see
	// Seat.Charge), which its next requests take on top of their own; at
	// most maxDebt, and gone with the flow.
	debt int
	// waiting holds its waiting requests (*waiter), oldest first but for
	// resumes, which go to the front.
	waiting list.List
	// inRound is its element of Queue.round; nil when nothing waits.
	inRound *list.Element
}

// waiter is one request waiting for a seat.
type waiter struct {
	seat  *Seat
	since time.Time
	elem  *list.Element
	// ready is closed when the request is seated (seated is then true).
	ready  chan struct{}
	seated bool
}

// Seat is the seats a request holds. Its methods are for the request's
// own goroutine.
type Seat struct {
	q *Queue
	f *flow
	// asked is the width the caller asked; width the seats taken (asked
	// and paid, the part of the flow's debt taken on, which goes back to
	// the flow if the request is never seated); cost what Charge said
	// the request cost.
	asked, width, paid, cost int
	since                    time.Time
	// held reports whether the seat is the request's: false after
	// Release, and while idle (see Idle). Guarded by q.mu.
	held bool
	// ctx is the context NewContext returns, kept here so that carrying
	// the seat costs no allocation of its own.
	ctx seatContext
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
// defaults: "fairq: Config.F is V; it must be R".
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Seats < 1 || c.Seats > MaxSeats:
		return fmt.Errorf("fairq: Config.Seats is %d; it must be from 1 to %d", c.Seats, MaxSeats)
	case c.QueueLength < 1 || c.QueueLength > MaxQueueLength:
		return fmt.Errorf("fairq: Config.QueueLength is %d; it must be from 1 to %d", c.QueueLength, MaxQueueLength)
	case c.WideSeats < 1 || c.WideSeats > c.Seats:
		return fmt.Errorf("fairq: Config.WideSeats is %d; it must be from 1 to the seats, %d", c.WideSeats, c.Seats)
	case c.MaxWait <= 0 || c.MaxWait > MaxMaxWait:
		return fmt.Errorf("fairq: Config.MaxWait is %s; it must be more than 0s and at most %s", c.MaxWait, MaxMaxWait)
	}
	return nil
}

// New returns a queue configured by cfg, or [Config.Validate]'s error.
func New(cfg Config) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	q := &Queue{
		seats:       cfg.Seats,
		wideSeats:   cfg.WideSeats,
		queueLength: cfg.QueueLength,
		maxWait:     cfg.MaxWait,
		obs:         cfg.Observer,
		flows:       map[Flow]*flow{},
	}
	return q, nil
}

// Seats returns how many requests the queue serves at once.
func (q *Queue) Seats() int { return q.seats }

// WideSeats returns how many seats wide requests (of more than one seat)
// may hold together ([Config.WideSeats]). It is also the widest a request
// can be.
func (q *Queue) WideSeats() int { return q.wideSeats }

// QueueLength returns how many requests of one flow may wait.
func (q *Queue) QueueLength() int { return q.queueLength }

// MaxWait returns how long a request may wait for a seat.
func (q *Queue) MaxWait() time.Duration { return q.maxWait }

// Acquire returns the seats of a request of f, width of them and as many
// more as f owes (see [Seat.Charge]), 1 to [MaxWidth] and at most
// [Queue.WideSeats] in all (a width out of range is taken as the nearest
// in range): at once when they are free and nobody whose turn comes first
// waits for them, else when f's turn comes and they are (see the
// package's contract). The caller must Release them. It returns a
// [*Refusal] when f's queue is full or no seat came within the longest
// wait, and ctx's error when ctx ended first; in every case the request
// holds no seat, owes what f owed, and has left the queue.
func (q *Queue) Acquire(ctx context.Context, f Flow, width int) (*Seat, error) {
	s := &Seat{q: q, asked: min(max(width, 1), MaxWidth, q.wideSeats)}
	if err := q.take(ctx, s, f, false); err != nil {
		return nil, err
	}
	return s, nil
}

// take seats s in flow key (in its flow when resuming), queueing at the
// back of the flow's queue, or at its front when resuming.
func (q *Queue) take(ctx context.Context, s *Seat, key Flow, resume bool) error {
	if err := ctx.Err(); err != nil {
		return err // gone already: no seat for nobody
	}
	q.mu.Lock()
	f := q.flowLocked(s, key)
	if !resume {
		// The flow's debt rides on its next requests.
		s.width = min(s.asked+f.debt, MaxWidth, q.wideSeats)
		s.paid = s.width - s.asked
		f.debt -= s.paid
	}
	// Work conservation: seats that are free are taken at once, unless
	// requests wait that dispatch would seat first (see dispatchLocked:
	// nobody overtakes the request whose turn it is).
	if q.round.Len() == 0 && q.fitsLocked(s.width) {
		q.seatLocked(f, s)
		q.mu.Unlock()
		q.observe(f.key.Kind, Seated, 0)
		return nil
	}
	if !resume && f.waiting.Len() >= q.queueLength {
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
	// Seats may be free that the requests ahead of it cannot use (they
	// wait for the wide share): dispatch decides.
	q.dispatchLocked()
	seated := w.seated
	q.mu.Unlock()
	if seated {
		q.observe(f.key.Kind, Seated, 0)
		return nil
	}

	// A resume waits as long as its client does: the request was
	// admitted once, and has work done that only a seat can answer.
	var timeout <-chan time.Time
	if !resume {
		timer := time.NewTimer(q.maxWait)
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

// flowLocked returns the flow s waits in, and sets s's: its own when it
// has one (brought back when it was forgotten while the seat was idle, or
// the one made since), else flow key's, made when there is none.
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

// leave takes w out of its flow's queue after its wait ended for why
// (ErrWaitTimeout, or the context's error) and returns the error to
// return. A seat given to w meanwhile is kept when the wait timed out
// (it came in time after all) and given back when the request is gone.
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
	// It may have been the one whose turn it was, waiting for more seats
	// than were free: the next may fit.
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

// refusalLocked returns the refusal of a request of f for reason, its
// Retry-After estimated as [Refusal] says.
func (q *Queue) refusalLocked(f *flow, reason error) *Refusal {
	turns := q.round.Len()
	if f.inRound == nil {
		turns++ // the flow would join the round
	}
	backlog := f.waiting.Len() + 1
	// In floating point: the product of long queues, many flows and a
	// slow database must clamp, not overflow.
	est := float64(backlog) * float64(turns) * float64(q.meanHold) / float64(q.seats)
	after := maxRetryAfter
	if est < float64(maxRetryAfter) {
		after = max(time.Duration(est), minRetryAfter)
	}
	return &Refusal{Reason: reason, Flow: f.key, RetryAfter: after,
		QueueLength: q.queueLength, MaxWait: q.maxWait}
}

// Release gives the seat back: to the next flow's oldest waiting request
// when requests wait, else to the free seats. Releasing a seat released
// already, or given up by Idle and not taken again, does nothing.
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

// maxDebt is the most seats a flow owes: four of its widest requests.
const maxDebt = 4 * MaxWidth

// Charge tells the queue what the request cost, in seats: the seats it
// would have taken had its cost been known when it asked (from the bytes
// it read and rendered, say). A cost above the seats it took is owed by
// its flow, and its next requests take the excess on top of their own
// width (see [Queue.Acquire]); a cost at or below them changes nothing.
// Call it before [Seat.Release]; the last call counts.
func (s *Seat) Charge(cost int) {
	s.q.mu.Lock()
	s.cost = cost
	s.q.mu.Unlock()
}

// Width returns the seats the request holds (or held).
func (s *Seat) Width() int { return s.width }

// repayLocked gives the flow back the debt s took on, when s was not
// seated after all.
func (q *Queue) repayLocked(s *Seat) {
	s.f.debt += s.paid
	s.paid = 0
}

// fitsLocked reports whether a request of width seats fits in the seats
// free and, when wide, in the wide share.
func (q *Queue) fitsLocked(width int) bool {
	return q.inUse+width <= q.seats && (width == 1 || q.wideInUse+width <= q.wideSeats)
}

// seatLocked gives s its seats, in f.
func (q *Queue) seatLocked(f *flow, s *Seat) {
	q.inUse += s.width
	f.inUse += s.width
	if s.width > 1 {
		q.wideInUse += s.width
	}
	s.held, s.since, s.paid = true, time.Now(), 0
}

// dispatchLocked gives free seats to the oldest request of the flow whose
// turn it is, which then goes to the end of the round if it has more
// waiting, and so on while the request whose turn it is fits in the seats
// that are free. It stops at the first that does not: nobody overtakes it.
// The one exception is a wide request that does not fit in the wide
// share: it waits for wide requests to end, which narrow ones behind it
// cannot delay, so the round passes it by (it keeps its place) and the
// next flow's request is considered.
func (q *Queue) dispatchLocked() {
	for e := q.round.Front(); e != nil; {
		f := e.Value.(*flow)
		w := f.waiting.Front().Value.(*waiter)
		if w.seat.width > 1 && q.wideInUse+w.seat.width > q.wideSeats {
			e = e.Next() // waits for the wide share first
			continue
		}
		if q.inUse+w.seat.width > q.seats {
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

// dequeueLocked takes w out of f's queue, and f out of the round when
// nothing of it waits any more.
func (q *Queue) dequeueLocked(f *flow, w *waiter) {
	f.waiting.Remove(w.elem)
	q.queued--
	if f.waiting.Len() == 0 {
		q.round.Remove(f.inRound)
		f.inRound = nil
	}
}

// forgetLocked drops f from the map when it holds no seat and nothing of
// it waits, so the map holds only the flows being served or queued.
func (q *Queue) forgetLocked(f *flow) {
	if f.inUse == 0 && f.waiting.Len() == 0 && q.flows[f.key] == f {
		delete(q.flows, f.key)
	}
}

func (q *Queue) observe(k Kind, o Outcome, waited time.Duration) {
	if q.obs != nil {
		q.obs.ObserveAdmission(k, o, waited)
	}
}

type seatKey struct{}

// seatContext is a context carrying a seat, as context.WithValue would.
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

// NewContext returns ctx carrying s, for [Idle] to find. A nil s carries
// none. The context is part of s: call it once per seat.
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

// Idle gives up the seat ctx carries (see [NewContext]), if it holds one,
// for a wait that uses no database connection, and returns the function
// that takes a seat again before the caller uses the database again. The
// seat is taken again in the same flow, at the head of its queue, and
// neither bound refuses it: the request was admitted once, its work is
// begun, and it waits for its seat as long as its client waits. resume
// returns ctx's error when ctx ends first. Without a seat in ctx, Idle
// does nothing and resume returns nil.
//
//	resume := fairq.Idle(ctx)
//	select { case <-woken: case <-ctx.Done(): }
//	if err := resume(); err != nil { return err }
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

// Stats is what the queue holds at one moment.
type Stats struct {
	// Seats is the capacity; InUse the seats taken (idle ones not), a
	// wide request's counting as its width.
	Seats, InUse int
	// Queued is the requests waiting, of every flow; Waiting the flows
	// they belong to.
	Queued, Waiting int
	// MeanHold is the moving average of how long a request held its seat
	// (zero before the first release).
	MeanHold time.Duration
	// Flows are the flows with a seat in use or a request waiting, most
	// waiting first, then most seats; at most the limit asked for.
	Flows []FlowStats
	// FlowsTotal is how many flows there are in all.
	FlowsTotal int
}

// FlowStats is one flow's part of [Stats].
type FlowStats struct {
	Flow Flow
	// InUse is the seats its requests hold.
	InUse   int
	Waiting int
	// OldestWait is how long its oldest waiting request has waited.
	OldestWait time.Duration
}

// Stats returns what the queue holds now, with at most limit flows.
func (q *Queue) Stats(limit int) Stats {
	now := time.Now()
	q.mu.Lock()
	st := Stats{Seats: q.seats, InUse: q.inUse, Queued: q.queued, Waiting: q.round.Len(),
		MeanHold: q.meanHold, FlowsTotal: len(q.flows)}
	if limit > 0 {
		st.Flows = make([]FlowStats, 0, min(limit, len(q.flows)))
		for _, f := range q.flows {
			fs := FlowStats{Flow: f.key, InUse: f.inUse, Waiting: f.waiting.Len()}
			// Oldest first, but resumes go to the front: look at each.
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
