package schedule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/loop"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/snapshot"
)

// ErrOverLimits is what a [StartFunc] wraps when the organization is over
// its limits; the drain records the occurrence refused, over_limits.
var ErrOverLimits = errors.New("schedule: the organization is over its limits")

// StartFunc starts one occurrence, once per attempt: the saved-search
// start (admission.Starter.StartSavedSearch), possibly behind the edge's
// gates.
type StartFunc func(ctx context.Context, p admission.SavedSearchStart) (admission.Result, error)

// Observer receives what the drain does; a *telemetry.Metrics is one. Its
// methods must not block.
type Observer interface {
	ObserveCameDue(n int)
	// ObserveOutcome counts one outcome: a status (started, refused,
	// not_ready, missed) and its reason or "".
	ObserveOutcome(outcome, reason string)
	// ObserveDrain reports, after a tick that took d, what [Drain.Stats]
	// answers.
	ObserveDrain(due int64, lag, d time.Duration)
}

type nopObserver struct{}

func (nopObserver) ObserveCameDue(int)                               {}
func (nopObserver) ObserveOutcome(string, string)                    {}
func (nopObserver) ObserveDrain(int64, time.Duration, time.Duration) {}

// DrainConfig configures a [Drain].
type DrainConfig struct {
	// Interval is the time between two ticks (plus up to a tenth, so
	// replicas do not tick in lock-step). Default 1 s.
	Interval time.Duration
	// Batch is the most occurrences one tick takes to start, and the most
	// schedules it plans. Default 10; 1 to 1000.
	Batch int
	// Width is how many of a tick's occurrences are started at once.
	// Default 4; 1 to MaxWidth. Each start also takes a seat of its
	// organization in the seat queue (serve's StartFunc), so the
	// seats bound the drain beside the API's requests.
	Width int
	// Lease is how long a tick holds the occurrences it took before
	// another drain may take them over: it bounds the tick's starts, and
	// is longer than a start's claim lease (30 s) so that whoever takes an
	// occurrence over finds the claim of a drain that died reclaimable.
	// Default 60 s; 1 s to 1 h.
	Lease time.Duration
	// RetryAfter is when a not-ready occurrence is tried again. Default an
	// hour; 1 s to 24 h.
	RetryAfter time.Duration
	// MaxIdleBackoff bounds the wait after ticks that failed (the
	// database down), which doubles from Interval. Default 30 s.
	MaxIdleBackoff time.Duration
	// Clock is the database clock; nil is the database's own.
	Clock *dbclock.Clock
	// Logger receives the tick's warnings; nil discards them.
	Logger *slog.Logger
	// Observer receives the counts; nil discards them.
	Observer Observer

	// afterStart, set by tests alone, runs after an occurrence's start
	// returned and before its outcome is recorded; errCrash from it makes
	// the tick stop there, as a process killed at that point would.
	afterStart func(ctx context.Context, o taken) error
}

// errCrash is what a test's afterStart returns to leave the tick as a
// killed process would: nothing more is recorded.
var errCrash = errors.New("schedule: test: crashed")

// Limits of the settings.
const (
	MaxTick       = time.Hour // the longest DrainConfig.Interval
	MaxBatch      = 1000
	DefaultWidth  = 4
	MaxWidth      = 64
	MinLease      = time.Second
	MaxLease      = time.Hour
	MinRetryAfter = time.Second
	MaxRetryAfter = 24 * time.Hour
	// maxPlanned bounds the occurrences one tick plans for one schedule:
	// a drain back after a long outage plans a frequent schedule's missed
	// occurrences over several ticks.
	maxPlanned = 100
)

// WithDefaults returns c with zero fields set to their defaults.
func (c DrainConfig) WithDefaults() DrainConfig {
	c.Interval = cmp.Or(c.Interval, time.Second)
	c.Batch = cmp.Or(c.Batch, 10)
	c.Width = cmp.Or(c.Width, DefaultWidth)
	c.Lease = cmp.Or(c.Lease, time.Minute)
	c.RetryAfter = cmp.Or(c.RetryAfter, time.Hour)
	c.MaxIdleBackoff = cmp.Or(c.MaxIdleBackoff, 30*time.Second)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	c.Observer = cmp.Or[Observer](c.Observer, nopObserver{})
	return c
}

// Validate returns an error naming the field and its range when c, with
// its defaults applied, cannot run: "schedule: DrainConfig.F is V; it
// must be R".
func (c DrainConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Interval < 0 || c.Interval > MaxTick:
		return fmt.Errorf("schedule: DrainConfig.Interval is %s; it must be from 0s to %s", c.Interval, MaxTick)
	case c.Width < 1 || c.Width > MaxWidth:
		return fmt.Errorf("schedule: DrainConfig.Width is %d; it must be from 1 to %d", c.Width, MaxWidth)
	case c.Batch < 1 || c.Batch > MaxBatch:
		return fmt.Errorf("schedule: DrainConfig.Batch is %d; it must be from 1 to %d", c.Batch, MaxBatch)
	case c.Lease < MinLease || c.Lease > MaxLease:
		return fmt.Errorf("schedule: DrainConfig.Lease is %s; it must be from %s to %s", c.Lease, MinLease, MaxLease)
	case c.RetryAfter < MinRetryAfter || c.RetryAfter > MaxRetryAfter:
		return fmt.Errorf("schedule: DrainConfig.RetryAfter is %s; it must be from %s to %s", c.RetryAfter, MinRetryAfter, MaxRetryAfter)
	case c.MaxIdleBackoff < c.Interval:
		return fmt.Errorf("schedule: DrainConfig.MaxIdleBackoff %s: must be at least Interval (%s)", c.MaxIdleBackoff, c.Interval)
	}
	return nil
}

// Runs looks up the Run a start key admitted; a *runs.Store is one.
type Runs interface {
	LookupStart(ctx context.Context, org uuid.UUID, startKey string) (*runs.Run, *snapshot.Summary, error)
}

// DrainDeps are what a [Drain] runs on; every field is required.
type DrainDeps struct {
	Pool  *pgxpool.Pool
	Start StartFunc
	// Runs finds the Run an earlier attempt of an occurrence past its
	// catch-up window may have admitted; it must use the drain's clock.
	Runs Runs
}

// Drain plans and starts the occurrences of every schedule. It is safe for
// concurrent use, and any number of drains may run on one database: they
// take disjoint occurrences. docs/schedules.md describes the drain.
type Drain struct {
	db    *pgxpool.Pool
	start StartFunc
	runs  Runs
	cfg   DrainConfig
	clock func(context.Context, time.Duration) bool // tests' stub of the waits of Run
}

// NewDrain returns a drain on d, or an error naming the field when a
// dependency is missing or cfg fails [DrainConfig.Validate].
func NewDrain(d DrainDeps, cfg DrainConfig) (*Drain, error) {
	switch {
	case d.Pool == nil:
		return nil, errors.New("schedule: DrainDeps.Pool is required")
	case d.Start == nil:
		return nil, errors.New("schedule: DrainDeps.Start is required")
	case d.Runs == nil:
		return nil, errors.New("schedule: DrainDeps.Runs is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Drain{db: d.Pool, start: d.Start, runs: d.Runs, cfg: cfg.WithDefaults()}, nil
}

// TickReport is what one tick did.
type TickReport struct {
	// Planned counts the occurrences written as due, of which
	// PlannedMissed were already past their catch-up window.
	Planned, PlannedMissed int
	Taken                  int
	// The outcomes of the taken occurrences, but those left to their
	// lease or whose fence was lost.
	Started, Refused, NotReady, Missed int
	Left, FenceLost                    int
}

// taken is an occurrence a tick holds, with what its start needs.
type taken struct {
	org, savedSearchID uuid.UUID
	dueAt              time.Time
	status             string // after the take: missed, or still open
	late               bool   // past its deadline: never started again
	hasSchedule        bool
	paused             bool
	actor              *string
	options            admission.StartOptions
}

// Tick plans the occurrences that came due, takes at most Batch open ones
// under a lease (SKIP LOCKED), closes those past their catch-up window as
// missed, starts the others at most Width at once, and records each
// outcome under the lease's fence. It returns an error only when the
// pass's statements fail (on a cluster, after starting what the shards
// that answered gave it) or an outcome could not be recorded; a failed
// start is an outcome.
func (d *Drain) Tick(ctx context.Context) (_ TickReport, err error) {
	defer dberr.Annotate(&err)
	var rep TickReport
	token := uuid.New()
	leasedAt := time.Now()
	p := passParams{now: d.cfg.Clock.Arg(), bound: d.cfg.Batch, lease: d.cfg.Lease, token: token,
		retention: runs.Retention, maxPlanned: maxPlanned}
	var planErr error
	rep.Planned, rep.PlannedMissed, planErr = plan(ctx, d.db, p)
	held, takeErr := take(ctx, d.db, p)
	rep.Taken = len(held)
	passErr := errors.Join(planErr, takeErr)
	if passErr != nil {
		// One shard failing does not stop what the others took: start it, as
		// its lease would otherwise hold it.
		passErr = fmt.Errorf("schedule: drain pass: %w", passErr)
		if rep.Taken == 0 && rep.Planned == 0 {
			return rep, passErr
		}
	}
	defer func() { err = errors.Join(err, passErr) }()
	if rep.Planned > 0 {
		d.cfg.Observer.ObserveCameDue(rep.Planned)
	}
	for range rep.PlannedMissed {
		d.cfg.Observer.ObserveOutcome(StatusMissed, "")
	}
	// The starts must end inside the lease; a quarter is left to record.
	sctx, cancel := context.WithDeadline(ctx, leasedAt.Add(d.cfg.Lease-d.cfg.Lease/4))
	defer cancel()
	var (
		mu      sync.Mutex // guards rep, stop and failed
		stop    bool       // a crash, a shutdown or a failed record: start no more
		failed  error      // a record that failed
		crashed bool
		wg      sync.WaitGroup
		width   = make(chan struct{}, d.cfg.Width)
	)
	// count maps an outcome's status to its counter, under mu.
	count := map[string]*int{StatusMissed: &rep.Missed, StatusStarted: &rep.Started,
		StatusRefused: &rep.Refused, StatusNotReady: &rep.NotReady}
	for i, o := range held {
		if o.status == StatusMissed {
			mu.Lock()
			rep.Missed++
			mu.Unlock()
			d.cfg.Observer.ObserveOutcome(StatusMissed, "")
			continue
		}
		width <- struct{}{} // at most Width starts at once
		mu.Lock()
		halt := stop || sctx.Err() != nil
		if halt {
			// Left held: another drain takes them when the lease passes.
			for _, o := range held[i:] {
				if o.status != StatusMissed {
					rep.Left++
				}
			}
		}
		mu.Unlock()
		if halt {
			<-width
			break
		}
		wg.Go(func() {
			defer func() { <-width }()
			status, reason, err := d.attempt(sctx, o, token)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, errCrash):
				stop, crashed = true, true
				return
			case err != nil && ctx.Err() != nil:
				// Shutting down: nothing is recorded, the lease hands it on.
				stop = true
				rep.Left++
				return
			case errors.Is(err, errFenceLost):
				rep.FenceLost++
				d.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "schedule: drain: another drain took the occurrence over; its outcome stands",
					slog.String("saved_search_id", o.savedSearchID.String()), slog.Time("due_at", o.dueAt))
				return
			case err != nil:
				stop = true
				failed = errors.Join(failed, err)
				return
			}
			d.cfg.Observer.ObserveOutcome(status, reason)
			*count[status]++
		})
	}
	wg.Wait()
	if failed != nil && !crashed {
		return rep, fmt.Errorf("schedule: drain: recording an outcome: %w", failed)
	}
	return rep, nil
}

// ErrBusy is what a [StartFunc] wraps when it was refused a seat: the
// occurrence is not ready, [ReasonBusy], and tried again at the next tick.
var ErrBusy = errors.New("schedule: the seat queue refused the start a seat")

// errFenceLost reports an outcome the fence refused: another drain took
// the occurrence over.
var errFenceLost = errors.New("schedule: occurrence fence lost")

// attempt starts o once and records its outcome under token.
func (d *Drain) attempt(ctx context.Context, o taken, token uuid.UUID) (status, reason string, err error) {
	var out outcome
	switch {
	case o.late:
		// Past the catch-up window it is never started again, but an
		// earlier attempt may have admitted its Run before its drain died.
		run, _, err := d.runs.LookupStart(ctx, o.org, runs.SavedSearchStartKey(IdempotencyKey(o.savedSearchID, o.dueAt)))
		switch {
		case err == nil:
			out = outcome{status: StatusStarted, runID: &run.ID, retainUntil: &run.RetainUntil}
		case errors.Is(err, runs.ErrNotFound):
			out = outcome{status: StatusMissed}
		default:
			return "", "", fmt.Errorf("looking up the Run of a late occurrence: %w", err)
		}
	case !o.hasSchedule:
		out = outcome{status: StatusRefused, reason: ReasonScheduleRemoved}
	case o.paused:
		out = outcome{status: StatusRefused, reason: ReasonSchedulePaused}
	default:
		res, serr := d.start(ctx, admission.SavedSearchStart{
			Org:            o.org,
			SavedSearchID:  o.savedSearchID,
			IdempotencyKey: IdempotencyKey(o.savedSearchID, o.dueAt),
			Options:        o.options,
			Actor:          valueOr(o.actor, ""),
			Origin:         snapshot.OriginSchedule,
		})
		if d.cfg.afterStart != nil {
			if err := d.cfg.afterStart(ctx, o); err != nil {
				return "", "", err
			}
		}
		if serr != nil && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", "", serr // cancelled: the caller is shutting down
		}
		out = classify(res, serr)
	}
	// Recorded even when the start used up the tick's deadline.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Lease/4)
	defer cancel()
	if err := d.record(rctx, o, token, out); err != nil {
		return "", "", err
	}
	return out.status, out.reason, nil
}

type outcome struct {
	status, reason string
	runID          *uuid.UUID
	retainUntil    *time.Time
	lastError      *string
}

// classify turns a start's answer into an outcome: started; refused when
// a retry would be refused again; else not ready, retried later.
func classify(res admission.Result, err error) outcome {
	if err == nil {
		return outcome{status: StatusStarted, runID: &res.Run.ID, retainUntil: &res.Run.RetainUntil}
	}
	msg := err.Error()
	if len(msg) > 1000 {
		msg = strings.ToValidUTF8(msg[:1000], "")
	}
	out := outcome{status: StatusNotReady, lastError: &msg}
	switch {
	case errors.Is(err, ErrOverLimits):
		out.status, out.reason = StatusRefused, ReasonOverLimits
	case errs.Is(err, errs.NotFound):
		out.status, out.reason = StatusRefused, ReasonSavedSearchArchived
	case errs.Is(err, errs.Invalid), errs.Is(err, errs.KeyReused):
		out.status, out.reason = StatusRefused, ReasonInvalid
	case errors.Is(err, ErrBusy):
		out.reason = ReasonBusy
	case errs.Is(err, errs.InProgress):
		out.reason = ReasonInProgress
	case errors.Is(err, context.DeadlineExceeded):
		out.reason = ReasonTimeout
	case errs.Is(err, errs.Unavailable):
		out.reason = ReasonUnavailable
	default:
		out.reason = ReasonInternal
	}
	return out
}

// IdempotencyKey returns the Idempotency-Key of the start of the
// occurrence of savedSearchID due at dueAt, so every attempt of one
// occurrence admits at most one Run. It holds U+00B7, which the API
// refuses, so no client start shares it.
func IdempotencyKey(savedSearchID uuid.UUID, dueAt time.Time) string {
	return "schedule\u00b7" + savedSearchID.String() + "\u00b7" + dueAt.UTC().Format(time.RFC3339Nano)
}

// Stats returns the open occurrences due now and the drain's lag: how long
// the oldest due work (an occurrence to take, a schedule to plan) has
// waited; zero when none waits.
func (d *Drain) Stats(ctx context.Context) (due int64, lag time.Duration, err error) {
	defer dberr.Annotate(&err)
	var secs float64
	if err := d.db.QueryRow(ctx, drainStats, d.cfg.Clock.Arg()).Scan(&due, &secs); err != nil {
		return 0, 0, fmt.Errorf("schedule: drain stats: %w", err)
	}
	return due, time.Duration(max(secs, 0) * float64(time.Second)), nil
}

// Run ticks until ctx ends, every Interval plus up to a tenth; after a
// failed tick the wait doubles up to MaxIdleBackoff.
func (d *Drain) Run(ctx context.Context) {
	loop.Loop{Interval: d.cfg.Interval, Backoff: 2 * d.cfg.Interval, MaxBackoff: d.cfg.MaxIdleBackoff,
		First: loop.Jitter(d.cfg.Interval), Clock: d.clock,
		Failed: func(ctx context.Context, err error, next time.Duration) {
			d.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "schedule: drain: tick failed; backing off",
				slog.String("error", err.Error()), slog.Duration("next", next))
		}}.Run(ctx, d.pass)
}

// pass is one tick of [Drain.Run], logged and observed.
func (d *Drain) pass(ctx context.Context) (loop.Next, error) {
	start := time.Now()
	rep, err := d.Tick(ctx)
	if err != nil {
		return loop.Next{}, err
	}
	took := time.Since(start)
	if rep.Taken > 0 || rep.Planned > 0 {
		d.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "schedule: drain: tick",
			slog.Int("planned", rep.Planned), slog.Int("taken", rep.Taken), slog.Int("started", rep.Started),
			slog.Int("refused", rep.Refused), slog.Int("not_ready", rep.NotReady),
			slog.Int("missed", rep.Missed+rep.PlannedMissed), slog.Int("left", rep.Left),
			slog.Int("fence_lost", rep.FenceLost), slog.Duration("duration", took))
	}
	if due, lag, err := d.Stats(ctx); err == nil {
		d.cfg.Observer.ObserveDrain(due, lag, took)
	}
	return loop.Next{}, nil
}
