package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/snapshot"
)

// TestDrainStartsADueOccurrenceOnce: a schedule's occurrence comes due,
// the drain starts it through the normal saved-search start, and records
// started with the Run; the snapshot says the scheduler started it, for
// the actor who set the schedule. Ticks before the next due time start
// nothing more.
func TestDrainStartsADueOccurrenceOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.search(t)
	sc := b.schedule(t, id, hourly())
	if sc.NextDueAt == nil || !sc.NextDueAt.Equal(t0) {
		t.Fatalf("next_due_at = %v, want %s", sc.NextDueAt, t0)
	}
	d := b.drain(t, drainOpts{})

	b.clock.Set(t0.Add(-time.Second))
	if rep := b.tick(t, d); rep.Planned != 0 || rep.Taken != 0 {
		t.Fatalf("a tick before the due time: %+v, want nothing", rep)
	}
	b.clock.Set(t0)
	if rep := b.tick(t, d); rep.Planned != 1 || rep.Started != 1 {
		t.Fatalf("the tick at the due time: %+v, want one planned and started", rep)
	}
	o := b.occ(t, id, t0)
	if o.status != StatusStarted || o.runID == nil || o.attempts != 1 || o.leased {
		t.Fatalf("occurrence = %+v, want started with its Run after one attempt", o)
	}
	run, err := b.runs.Get(b.ctx, b.org, *o.runID)
	if err != nil {
		t.Fatal(err)
	}
	if run.StartKey != "saved_search:"+IdempotencyKey(id, t0) || run.CreatedBy == nil || *run.CreatedBy != "alice" {
		t.Errorf("Run start key %q, actor %v; want the occurrence's key and the schedule's actor", run.StartKey, run.CreatedBy)
	}
	var origin, by string
	if err := b.db.QueryRow(b.ctx, `SELECT origin, created_by FROM agent.saved_search_snapshots WHERE id = $1`,
		run.SnapshotID).Scan(&origin, &by); err != nil {
		t.Fatal(err)
	}
	if origin != snapshot.OriginSchedule || by != "alice" {
		t.Errorf("snapshot origin %q by %q, want %q by alice", origin, by, snapshot.OriginSchedule)
	}

	b.clock.Set(t0.Add(time.Hour - time.Second))
	if rep := b.tick(t, d); rep.Taken != 0 {
		t.Errorf("a tick before the next due time took %d", rep.Taken)
	}
	b.clock.Set(t0.Add(time.Hour))
	if rep := b.tick(t, d); rep.Started != 1 {
		t.Errorf("the tick at the next due time: %+v, want one started", rep)
	}
	if n := b.runsOf(t, id, t0); n != 1 {
		t.Errorf("%d Runs for the first occurrence, want 1", n)
	}
}

// TestAScheduledRunHasItsDispatch: a scheduled start admits its Run
// through the normal admission statement, so the Run's dispatch to the
// runtime (package dispatch's outbox) commits with it, pending and due at
// once; a tick that starts nothing new writes none.
func TestAScheduledRunHasItsDispatch(t *testing.T) {
	t.Parallel()
	b, id := setupHourly(t)
	d := b.drain(t, drainOpts{})
	for _, at := range []time.Time{t0, t0.Add(time.Hour), t0.Add(time.Hour + time.Minute)} {
		b.clock.Set(at)
		b.tick(t, d)
	}
	runsN := b.count(t, `SELECT count(*) FROM agent.runs WHERE organization_id = $1 AND saved_search_id = $2`, b.org, id)
	pending := b.count(t, `SELECT count(*) FROM agent.run_dispatches d JOIN agent.runs r
		ON r.organization_id = d.organization_id AND r.id = d.run_id
		WHERE r.organization_id = $1 AND r.saved_search_id = $2
		AND d.state = 'pending' AND d.attempts = 0 AND d.next_attempt_at = r.created_at`, b.org, id)
	if runsN != 2 || pending != 2 {
		t.Errorf("%d Runs and %d pending dispatches due at admission, want 2 and 2", runsN, pending)
	}
	if n := b.count(t, `SELECT count(*) FROM agent.run_dispatches WHERE organization_id = $1`, b.org); n != runsN {
		t.Errorf("%d dispatches for %d Runs, want one each", n, runsN)
	}
}

// TestTwoDrainsRacingAdmitOneRun: drain A starts an occurrence and stalls
// before recording it, past its lease; drain B takes the occurrence over,
// starts it too, and stalls before its own record. Both starts carry the
// occurrence's key, so there is one Run. A's late record is refused by the
// fence while the occurrence is still open under B's lease (B's token,
// not A's), and B's record is the outcome.
func TestTwoDrainsRacingAdmitOneRun(t *testing.T) {
	t.Parallel()
	b, id := setupHourly(t)
	b.clock.Set(t0)

	stall := func() (hook func(context.Context, taken) error, stalled, resume chan struct{}) {
		stalled, resume = make(chan struct{}), make(chan struct{})
		return func(context.Context, taken) error {
			close(stalled)
			<-resume
			return nil
		}, stalled, resume
	}
	hookA, stalledA, resumeA := stall()
	hookB, stalledB, resumeB := stall()
	a := b.drain(t, drainOpts{afterStart: hookA})
	d := b.drain(t, drainOpts{afterStart: hookB})
	tick := func(dr *Drain) chan TickReport {
		out := make(chan TickReport, 1)
		go func() {
			rep, err := dr.Tick(context.Background())
			if err != nil {
				t.Error(err)
			}
			out <- rep
		}()
		return out
	}
	repA := tick(a)
	<-stalledA
	if rep := b.tick(t, b.drain(t, drainOpts{})); rep.Taken != 0 {
		t.Fatalf("a third drain took %d while A's lease was live", rep.Taken)
	}
	b.clock.Advance(time.Minute + time.Second) // A's lease passes
	repB := tick(d)
	<-stalledB
	close(resumeA)
	if rep := <-repA; rep.FenceLost != 1 || rep.Started != 0 {
		t.Errorf("A, late, while B holds the occurrence: %+v, want its record refused by the fence", rep)
	}
	if o := b.occ(t, id, t0); o.status != StatusPending || !o.leased || o.attempts != 2 {
		t.Errorf("after A's late record: occurrence %+v, want still open under B's lease", o)
	}
	close(resumeB)
	if rep := <-repB; rep.Started != 1 {
		t.Errorf("B: %+v, want it to record the start", rep)
	}
	o := b.occ(t, id, t0)
	if o.status != StatusStarted || o.attempts != 2 {
		t.Errorf("occurrence = %+v, want started after two attempts", o)
	}
	if n := b.runsOf(t, id, t0); n != 1 {
		t.Errorf("%d Runs for one occurrence, want 1", n)
	}
	if n := b.count(t, `SELECT count(*) FROM agent.saved_search_snapshots WHERE saved_search_id = $1`, id); n != 1 {
		t.Errorf("%d snapshots for one occurrence, want 1", n)
	}
}

// TestDrainKilledBetweenStartAndRecord: a drain dies after the start
// admitted the Run and before it recorded the outcome. Once its lease
// passes another drain takes the occurrence, and its start replays the
// Run: one Run, recorded started. The same holds when the occurrence is
// past its catch-up window by then: it is started with that Run, not
// missed, and not started again.
func TestDrainKilledBetweenStartAndRecord(t *testing.T) {
	t.Parallel()
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("late=%v", late), func(t *testing.T) {
			t.Parallel()
			b, id := setupHourly(t)
			b.clock.Set(t0)
			killed := b.drain(t, drainOpts{afterStart: func(context.Context, taken) error { return errCrash }})
			b.tick(t, killed)
			if o := b.occ(t, id, t0); o.status != StatusPending || !o.leased || b.runsOf(t, id, t0) != 1 {
				t.Fatalf("after the kill: occurrence %+v, %d Runs; want it held, open, with its Run", o, b.runsOf(t, id, t0))
			}
			var calls atomic.Int32
			d := b.drain(t, drainOpts{start: func(ctx context.Context, p admission.SavedSearchStart) (admission.Result, error) {
				if p.IdempotencyKey == IdempotencyKey(id, t0) {
					calls.Add(1)
				}
				return b.starter.StartSavedSearch(ctx, p)
			}})
			if rep := b.tick(t, d); rep.Taken != 0 {
				t.Fatalf("another drain took %d within the dead drain's lease", rep.Taken)
			}
			if late {
				b.clock.Set(t0.Add(24*time.Hour + time.Second))
			} else {
				b.clock.Advance(time.Minute + time.Second)
			}
			for range 5 {
				b.tick(t, d)
			}
			o := b.occ(t, id, t0)
			if o.status != StatusStarted || o.runID == nil {
				t.Fatalf("occurrence = %+v, want started", o)
			}
			if n := b.runsOf(t, id, t0); n != 1 {
				t.Errorf("%d Runs, want 1", n)
			}
			var runKey string
			if err := b.db.QueryRow(b.ctx, `SELECT start_key FROM agent.runs WHERE id = $1`, o.runID).Scan(&runKey); err != nil {
				t.Fatal(err)
			}
			if runKey != "saved_search:"+IdempotencyKey(id, t0) {
				t.Errorf("the recorded Run has start key %q, want the occurrence's", runKey)
			}
			// On time: one start, which replayed. Late: the occurrence's Run
			// is looked up, and it is never started again.
			want, attempts := int32(1), 2
			if late {
				want, attempts = 0, 1
			}
			if calls.Load() != want || o.attempts != attempts {
				t.Errorf("after the kill: %d starts, %d attempts; want %d and %d", calls.Load(), o.attempts, want, attempts)
			}
		})
	}
}

// TestMissedPastTheCatchUpWindow: an occurrence 24 h late is still
// started; one 24 h and a second late is missed, closed, and never
// started: no Run exists for it.
func TestMissedPastTheCatchUpWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	onTime, late := b.hourlySearch(t), b.hourlySearch(t)
	// At t0 a drain plans both occurrences and goes no further (it
	// died), so both stay pending, never attempted; then a drain tries
	// one, which is not ready.
	b.clock.Set(t0)
	if planned, _, err := plan(b.ctx, b.db, passParams{now: b.clock.Clock().Arg(), bound: 10, maxPlanned: maxPlanned,
		retention: time.Hour}); err != nil || planned != 2 {
		t.Fatalf("plan = %d, %v; want two occurrences", planned, err)
	}
	one := b.drain(t, drainOpts{batch: 1, start: func(context.Context, admission.SavedSearchStart) (admission.Result, error) {
		return admission.Result{}, errs.Wrap(errs.Unavailable, errors.New("database down"))
	}})
	if rep := b.tick(t, one); rep.Taken != 1 || rep.NotReady != 1 {
		t.Fatalf("the first tick: %+v, want one taken and not ready", rep)
	}
	var pendingID uuid.UUID
	if err := b.db.QueryRow(b.ctx, `SELECT saved_search_id FROM agent.schedule_occurrences
		WHERE organization_id = $1 AND status = 'pending'`, b.org).Scan(&pendingID); err != nil {
		t.Fatal(err)
	}

	d := b.drain(t, drainOpts{})
	b.clock.Set(t0.Add(24*time.Hour + time.Second))
	for range 5 {
		b.tick(t, d)
	}
	if o := b.occ(t, pendingID, t0); o.status != StatusMissed || o.runID != nil || o.attempts != 0 {
		t.Errorf("the pending occurrence 24 h 1 s late = %+v, want missed, never attempted", o)
	}
	if n := b.runsOf(t, pendingID, t0); n != 0 {
		t.Errorf("%d Runs for a missed occurrence, want none", n)
	}
	notReadyID := onTime
	if pendingID == onTime {
		notReadyID = late
	}
	if o := b.occ(t, notReadyID, t0); o.status != StatusMissed || b.runsOf(t, notReadyID, t0) != 0 {
		t.Errorf("the not-ready occurrence 24 h 1 s late = %+v, want missed with no Run", o)
	}
	// The occurrences after t0 came due within the window: started.
	if o := b.occ(t, pendingID, t0.Add(time.Hour)); o.status != StatusStarted {
		t.Errorf("the occurrence 23 h late = %+v, want started", o)
	}

	// Exactly 24 h late is within the window.
	c := setup(t)
	id := c.search(t)
	c.schedule(t, id, hourly())
	c.clock.Set(t0.Add(24 * time.Hour))
	dc := c.drain(t, drainOpts{batch: 100})
	c.tick(t, dc)
	if o := c.occ(t, id, t0); o.status != StatusStarted {
		t.Errorf("an occurrence exactly 24 h late = %+v, want started", o)
	}
	// And one planned already 24 h 1 s late is written missed at once.
	c.clock.Set(t0.Add(49*time.Hour + time.Second))
	// (the schedule's next_due_at is t0+25h: planning now writes t0+25h..t0+49h)
	rep := c.tick(t, dc)
	if rep.PlannedMissed != 1 {
		t.Errorf("planning 24 h 1 s late: %+v, want the occurrence written missed", rep)
	}
	if o := c.occ(t, id, t0.Add(25*time.Hour)); o.status != StatusMissed || c.runsOf(t, id, t0.Add(25*time.Hour)) != 0 {
		t.Errorf("the occurrence planned 24 h 1 s late = %+v, want missed with no Run", o)
	}
}

// TestNotReadyIsRetriedAnHourLaterAndOnlyThen: a start that fails for a
// transient reason records not_ready with the reason; ticks before the
// hour is up do not try it again; the tick at the hour does.
func TestNotReadyIsRetriedAnHourLaterAndOnlyThen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.search(t)
	iv, at := int64(86400), t0
	b.schedule(t, id, SetParams{IntervalSeconds: &iv, StartAt: &at})
	var calls atomic.Int32
	fail := true
	d := b.drain(t, drainOpts{start: func(ctx context.Context, p admission.SavedSearchStart) (admission.Result, error) {
		calls.Add(1)
		if fail {
			return admission.Result{}, errs.Wrap(errs.Unavailable, errors.New("connection refused"))
		}
		return b.starter.StartSavedSearch(ctx, p)
	}})
	b.clock.Set(t0)
	if rep := b.tick(t, d); rep.NotReady != 1 {
		t.Fatalf("the first tick: %+v, want not ready", rep)
	}
	o := b.occ(t, id, t0)
	if o.status != StatusNotReady || o.reason != ReasonUnavailable || !o.nextAttempt.Equal(t0.Add(time.Hour)) || o.leased {
		t.Fatalf("occurrence = %+v, want not_ready (unavailable), retried at %s", o, t0.Add(time.Hour))
	}
	fail = false
	for _, at := range []time.Duration{time.Second, 30 * time.Minute, time.Hour - time.Second} {
		b.clock.Set(t0.Add(at))
		b.tick(t, d)
		if n := calls.Load(); n != 1 {
			t.Fatalf("at +%s: %d starts, want none after the first until the hour is up", at, n)
		}
	}
	b.clock.Set(t0.Add(time.Hour))
	if rep := b.tick(t, d); rep.Started != 1 {
		t.Fatalf("at +1h: %+v, want the retry started", rep)
	}
	if o := b.occ(t, id, t0); o.status != StatusStarted || o.attempts != 2 || calls.Load() != 2 {
		t.Errorf("occurrence = %+v after %d starts, want started on the second", o, calls.Load())
	}
}

// TestBusyIsRetriedAtTheNextTick: a start the seat queue refused a
// seat (its error wraps ErrBusy, as serve's seated StartFunc makes it) is
// not ready, busy, and tried again at the drain's next tick, not an hour
// later (issue 36: another organization's occurrence, refused while a
// noisy one held every seat, waited an hour).
func TestBusyIsRetriedAtTheNextTick(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.search(t)
	iv, at := int64(86400), t0
	b.schedule(t, id, SetParams{IntervalSeconds: &iv, StartAt: &at})
	busy := true
	d := b.drain(t, drainOpts{start: func(ctx context.Context, p admission.SavedSearchStart) (admission.Result, error) {
		if busy {
			return admission.Result{}, errs.Wrap(errs.Unavailable, fmt.Errorf("%w: every seat taken", ErrBusy))
		}
		return b.starter.StartSavedSearch(ctx, p)
	}})
	b.clock.Set(t0)
	if rep := b.tick(t, d); rep.NotReady != 1 {
		t.Fatalf("the first tick: %+v, want not ready", rep)
	}
	next := t0.Add(time.Second) // the drain's Interval, by default
	if o := b.occ(t, id, t0); o.status != StatusNotReady || o.reason != ReasonBusy || !o.nextAttempt.Equal(next) {
		t.Fatalf("occurrence = %+v, want not_ready (busy), tried again at %s", o, next)
	}
	busy = false
	b.clock.Set(next)
	if rep := b.tick(t, d); rep.Started != 1 {
		t.Fatalf("at the next tick: %+v, want the retry started", rep)
	}
}

// TestNotReadyIsNotRetriedForEver: a start that keeps failing is tried
// every hour while within the catch-up window, then missed.
func TestNotReadyIsNotRetriedForEver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.search(t)
	iv, at, catchUp := int64(7*86400), t0, int64(3*3600)
	b.schedule(t, id, SetParams{IntervalSeconds: &iv, StartAt: &at, CatchUpSeconds: &catchUp})
	var calls atomic.Int32
	d := b.drain(t, drainOpts{start: func(context.Context, admission.SavedSearchStart) (admission.Result, error) {
		calls.Add(1)
		return admission.Result{}, &errs.Error{Kind: errs.InProgress, Message: "held"}
	}})
	for h := range 6 {
		b.clock.Set(t0.Add(time.Duration(h)*time.Hour + time.Duration(h)*time.Second))
		b.tick(t, d)
	}
	o := b.occ(t, id, t0)
	if o.status != StatusMissed || calls.Load() != 3 {
		t.Errorf("after 5 h with a 3 h window: %+v after %d starts; want missed after 3 (at 0, 1 and 2 h)", o, calls.Load())
	}
}

// TestPausedScheduleProducesNoOccurrences: paused, a schedule comes due
// for nobody; resumed three days later, it comes due next at or after the
// resume, and nothing of the three days is back-filled.
func TestPausedScheduleProducesNoOccurrences(t *testing.T) {
	t.Parallel()
	b, id := setupHourly(t)
	b.clock.Set(t0.Add(-time.Minute))
	sc, err := b.store.Pause(b.ctx, b.org, id, nil)
	if err != nil || !sc.Paused || sc.NextDueAt != nil {
		t.Fatalf("Pause = %+v, %v; want paused with no next due time", sc, err)
	}
	d := b.drain(t, drainOpts{batch: 100})
	for day := range 3 {
		b.clock.Set(t0.Add(time.Duration(day+1) * 24 * time.Hour))
		b.tick(t, d)
	}
	if got := b.dues(t, id); len(got) != 0 {
		t.Fatalf("a paused schedule has occurrences %v", got)
	}
	resumeAt := t0.Add(3*24*time.Hour + 30*time.Minute)
	b.clock.Set(resumeAt)
	if sc, err = b.store.Resume(b.ctx, b.org, id, nil); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(3*24*time.Hour + time.Hour); sc.Paused || sc.NextDueAt == nil || !sc.NextDueAt.Equal(want) {
		t.Fatalf("Resume = next %v paused %v, want next %s", sc.NextDueAt, sc.Paused, want)
	}
	b.tick(t, d)
	if got := b.dues(t, id); len(got) != 0 {
		t.Fatalf("resuming back-filled %v", got)
	}
	b.clock.Set(*sc.NextDueAt)
	b.tick(t, d)
	if got := b.dues(t, id); len(got) != 1 || !got[0].Equal(*sc.NextDueAt) {
		t.Errorf("after the resume: occurrences %v, want one at %s", got, sc.NextDueAt)
	}
}

// TestPauseAndRemoveRefuseOpenOccurrences: an occurrence that is not ready
// when its schedule is paused, or removed, is refused with that reason
// the next time a drain takes it, and never started.
func TestPauseAndRemoveRefuseOpenOccurrences(t *testing.T) {
	t.Parallel()
	b := setup(t)
	paused, removed := b.hourlySearch(t), b.hourlySearch(t)
	b.clock.Set(t0)
	fail := true
	d := b.drain(t, drainOpts{start: func(ctx context.Context, p admission.SavedSearchStart) (admission.Result, error) {
		if fail {
			return admission.Result{}, errs.Wrap(errs.Unavailable, errors.New("down"))
		}
		return b.starter.StartSavedSearch(ctx, p)
	}})
	if rep := b.tick(t, d); rep.NotReady != 2 {
		t.Fatalf("first tick %+v, want two not ready", rep)
	}
	fail = false
	if _, err := b.store.Pause(b.ctx, b.org, paused, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Remove(b.ctx, b.org, removed, nil); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(t0.Add(time.Hour))
	b.tick(t, d)
	for id, reason := range map[uuid.UUID]string{paused: ReasonSchedulePaused, removed: ReasonScheduleRemoved} {
		if o := b.occ(t, id, t0); o.status != StatusRefused || o.reason != reason || b.runsOf(t, id, t0) != 0 {
			t.Errorf("occurrence = %+v, want refused %s with no Run", o, reason)
		}
	}
	if got := b.dues(t, paused); len(got) != 1 {
		t.Errorf("the paused schedule has occurrences %v, want only the first", got)
	}
	if got := b.dues(t, removed); len(got) != 1 {
		t.Errorf("the removed schedule has occurrences %v, want only the first", got)
	}
}

// TestArchivedSavedSearch: an occurrence of a saved search archived before
// its start is refused (saved_search_archived) by the start itself, no
// Run is admitted, and the schedule comes due no more.
func TestArchivedSavedSearch(t *testing.T) {
	t.Parallel()
	b, id := setupHourly(t)
	if err := b.searches.Archive(b.ctx, b.org, id); err != nil {
		t.Fatal(err)
	}
	d := b.drain(t, drainOpts{batch: 100})
	b.clock.Set(t0.Add(3 * time.Hour))
	if rep := b.tick(t, d); rep.Planned != 1 || rep.Refused != 1 {
		t.Fatalf("tick after the archive: %+v, want one occurrence, refused", rep)
	}
	if o := b.occ(t, id, t0); o.status != StatusRefused || o.reason != ReasonSavedSearchArchived || b.runsOf(t, id, t0) != 0 {
		t.Errorf("occurrence = %+v, want refused saved_search_archived with no Run", o)
	}
	sc, err := b.store.Get(b.ctx, b.org, id)
	if err != nil || sc.NextDueAt != nil {
		t.Errorf("schedule after the archive: %+v, %v; want no next due time", sc, err)
	}
	b.clock.Set(t0.Add(48 * time.Hour))
	b.tick(t, d)
	if got := b.dues(t, id); len(got) != 1 {
		t.Errorf("occurrences %v, want the one that recorded the archive", got)
	}
	// A change that would start it again is refused.
	if _, _, err := b.store.Set(b.ctx, b.org, id, hourly()); !errors.Is(err, ErrSavedSearchNotFound) {
		t.Errorf("Set on an archived saved search = %v, want ErrSavedSearchNotFound", err)
	}
}

// TestRefusalsAreClassified: a gate refusing the organization, and a
// start refusing its input, are refused with their reasons; anything else
// unknown is not ready (internal).
func TestRefusalsAreClassified(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err            error
		status, reason string
	}{
		{fmt.Errorf("gate: %w", ErrOverLimits), StatusRefused, ReasonOverLimits},
		{admission.ErrInvalid, StatusRefused, ReasonInvalid},
		{admission.ErrKeyReused, StatusRefused, ReasonInvalid},
		{admission.ErrNotFound, StatusRefused, ReasonSavedSearchArchived},
		{errors.New("boom"), StatusNotReady, ReasonInternal},
		{context.DeadlineExceeded, StatusNotReady, ReasonTimeout},
	} {
		if out := classify(admission.Result{}, tc.err); out.status != tc.status || out.reason != tc.reason {
			t.Errorf("classify(%v) = %s %s, want %s %s", tc.err, out.status, out.reason, tc.status, tc.reason)
		}
	}
	b, id := setupHourly(t)
	b.clock.Set(t0)
	d := b.drain(t, drainOpts{start: func(context.Context, admission.SavedSearchStart) (admission.Result, error) {
		return admission.Result{}, fmt.Errorf("seat queue: %w", ErrOverLimits)
	}})
	b.tick(t, d)
	if o := b.occ(t, id, t0); o.status != StatusRefused || o.reason != ReasonOverLimits {
		t.Errorf("occurrence = %+v, want refused over_limits", o)
	}
}

// TestDailyScheduleThroughTheDrainAcrossDaylightSaving: a daily 02:30
// Europe/Paris schedule, drained day by day across the night the clocks go
// back, comes due once a night, at the first 02:30.
func TestDailyScheduleThroughTheDrainAcrossDaylightSaving(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.search(t)
	expr, zone, at := "30 2 * * *", "Europe/Paris", utc("2030-10-24T12:00:00Z")
	b.clock.Set(at)
	sc := b.schedule(t, id, SetParams{Cron: &expr, TimeZone: &zone})
	if want := utc("2030-10-25T00:30:00Z"); !sc.NextDueAt.Equal(want) {
		t.Fatalf("next_due_at = %s, want %s", sc.NextDueAt, want)
	}
	d := b.drain(t, drainOpts{})
	for h := 0; h < 4*24; h++ {
		b.clock.Set(at.Add(time.Duration(h) * time.Hour))
		b.tick(t, d)
	}
	// 27 October 2030 is the night the clocks go back in Paris.
	want := []time.Time{utc("2030-10-25T00:30:00Z"), utc("2030-10-26T00:30:00Z"), utc("2030-10-27T00:30:00Z"),
		utc("2030-10-28T01:30:00Z")}
	got := b.dues(t, id)
	if len(got) != len(want) {
		t.Fatalf("occurrences %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("occurrence %d due %s, want %s", i, got[i], want[i])
		}
		if o := b.occ(t, id, got[i]); o.status != StatusStarted {
			t.Errorf("occurrence %d = %+v, want started", i, o)
		}
	}
}

// TestRacingDrainsAdmitOneRunPerOccurrence: four drains tick at once, with
// real commits, while the clock jumps past their leases mid-start, so
// occurrences are taken over while their first start still runs. However
// the races fall, every occurrence ends with one outcome and at most one
// Run, and each started one names the Run under its own key.
func TestRacingDrainsAdmitOneRunPerOccurrence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []uuid.UUID
	for range 24 {
		id := b.search(t)
		ids = append(ids, id)
		b.schedule(t, id, hourly())
	}
	b.clock.Set(t0)
	slow := func(ctx context.Context, p admission.SavedSearchStart) (admission.Result, error) {
		time.Sleep(time.Duration(5+p.SavedSearchID[0]%20) * time.Millisecond)
		return b.starter.StartSavedSearch(ctx, p)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var fenceLost, taken atomic.Int32
	for range 4 {
		d := b.drain(t, drainOpts{start: slow, batch: 3})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				rep, err := d.Tick(ctx)
				if err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
				fenceLost.Add(int32(rep.FenceLost))
				taken.Add(int32(rep.Taken))
			}
		}()
	}
	// The clock: for a second and a half, a jump of up to one and a half
	// leases every 10 ms, while the drains' starts run.
	for i := 0; i < 150; i++ {
		time.Sleep(10 * time.Millisecond)
		b.clock.Advance(time.Duration(i%3) * 45 * time.Second)
	}
	stop()
	wg.Wait()
	cutoff := b.clock.Now()

	// Converge: one drain, first at the cutoff (it plans what the racing
	// drains, slowed by a busy machine, had not planned yet), then with
	// the clock moved an hour and a second at a time, until nothing due by
	// the cutoff is open.
	d := b.drain(t, drainOpts{batch: 1000})
	b.tick(t, d)
	for i := 0; b.count(t, `SELECT count(*) FROM agent.schedule_occurrences WHERE closed_at IS NULL AND due_at <= $1`, cutoff) > 0; i++ {
		if i > 30 {
			t.Fatal("occurrences due by the cutoff are still open after 30 hours")
		}
		b.clock.Advance(time.Hour + time.Second)
		b.tick(t, d)
	}

	rows, err := b.db.Query(b.ctx, `SELECT o.saved_search_id, o.due_at, o.status, o.run_id, r.start_key
		FROM agent.schedule_occurrences o LEFT JOIN agent.runs r ON r.id = o.run_id AND r.organization_id = o.organization_id
		WHERE o.due_at <= $1`, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	type occ struct {
		id     uuid.UUID
		due    time.Time
		status string
		run    *uuid.UUID
		key    *string
	}
	var all []occ
	for rows.Next() {
		var o occ
		if err := rows.Scan(&o.id, &o.due, &o.status, &o.run, &o.key); err != nil {
			t.Fatal(err)
		}
		all = append(all, o)
	}
	rows.Close()
	if len(all) < len(ids) {
		t.Fatalf("%d occurrences due by the cutoff, want at least %d", len(all), len(ids))
	}
	started := 0
	for _, o := range all {
		n := b.runsOf(t, o.id, o.due)
		switch o.status {
		case StatusStarted:
			started++
			if o.key == nil || *o.key != "saved_search:"+IdempotencyKey(o.id, o.due) || n != 1 {
				t.Errorf("started occurrence %s %s names Run key %v, %d Runs under its key; want its own, one", o.id, o.due, o.key, n)
			}
		case StatusMissed, StatusRefused:
			if n != 0 {
				t.Errorf("%s occurrence %s %s has %d Runs", o.status, o.id, o.due, n)
			}
		default:
			t.Errorf("occurrence %s %s is still %s", o.id, o.due, o.status)
		}
	}
	// Every Run and snapshot of the organization (occurrences after the
	// cutoff too) belongs to a started occurrence, one each.
	allStarted := b.count(t, `SELECT count(*) FROM agent.schedule_occurrences WHERE organization_id = $1 AND status = 'started'`, b.org)
	if n := b.count(t, `SELECT count(*) FROM agent.runs WHERE organization_id = $1`, b.org); n != allStarted {
		t.Errorf("%d Runs for %d started occurrences", n, allStarted)
	}
	if n := b.count(t, `SELECT count(*) FROM agent.saved_search_snapshots WHERE organization_id = $1 AND origin = 'schedule'`, b.org); n != allStarted {
		t.Errorf("%d snapshots for %d started occurrences", n, allStarted)
	}
	t.Logf("%d occurrences due by the cutoff, %d started; the racing drains took %d times, %d records refused by the fence",
		len(all), started, taken.Load(), fenceLost.Load())
}

// TestStatsAndTheRunLoop: the drain's stats count what is due and how
// long it has waited (a schedule not yet planned counts in the lag); the
// run loop ticks until its context ends, starting what came due, and
// reports each tick to the observer.
func TestStatsAndTheRunLoop(t *testing.T) {
	t.Parallel()
	b, id := setupHourly(t)
	b.clock.Set(t0.Add(30 * time.Second))
	d := b.drain(t, drainOpts{})
	due, lag, err := d.Stats(b.ctx)
	if err != nil || due != 0 || lag != 30*time.Second {
		t.Fatalf("Stats before the plan = %d, %s, %v; want 0 due, a 30 s lag", due, lag, err)
	}
	if _, _, err := plan(b.ctx, b.db, passParams{now: b.clock.Clock().Arg(), bound: 10, maxPlanned: maxPlanned, retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if due, lag, err = d.Stats(b.ctx); err != nil || due != 1 || lag != 30*time.Second {
		t.Fatalf("Stats after the plan = %d, %s, %v; want 1 due, a 30 s lag", due, lag, err)
	}

	obs := &countingObserver{}
	run, err := NewDrain(DrainDeps{Pool: b.db, Start: b.starter.StartSavedSearch, Runs: b.runs},
		DrainConfig{Clock: b.clock.Clock(), Interval: 10 * time.Millisecond, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { defer close(done); run.Run(ctx) }()
	for deadline := time.Now().Add(20 * time.Second); b.occ(t, id, t0).status != StatusStarted; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run loop did not start the due occurrence")
		}
	}
	for deadline := time.Now().Add(20 * time.Second); obs.drains.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run loop reported no tick")
		}
	}
	cancel()
	<-done
	if obs.started.Load() != 1 {
		t.Errorf("the observer counted %d started, want 1", obs.started.Load())
	}
}

type countingObserver struct {
	started, drains atomic.Int32
}

func (o *countingObserver) ObserveCameDue(int) {}
func (o *countingObserver) ObserveOutcome(outcome, _ string) {
	if outcome == StatusStarted {
		o.started.Add(1)
	}
}
func (o *countingObserver) ObserveDrain(int64, time.Duration, time.Duration) { o.drains.Add(1) }

// TestAFailingTickBacksOffDoublingToItsCap: while its database is gone
// (here a closed pool), the run loop waits after each failed tick twice
// the wait before, from twice the Interval up to MaxIdleBackoff (a stub
// clock records the waits), and logs the wait it takes next.
func TestAFailingTickBacksOffDoublingToItsCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var log pgtest.SyncBuffer
	d, err := NewDrain(DrainDeps{Pool: pgtest.ClosedPool(t, b.db), Start: b.starter.StartSavedSearch, Runs: b.runs},
		DrainConfig{Clock: b.clock.Clock(), Interval: 5 * time.Millisecond, MaxIdleBackoff: 40 * time.Millisecond,
			Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}
	var waits []time.Duration
	d.clock = func(_ context.Context, w time.Duration) bool {
		waits = append(waits, w)
		return len(waits) <= len(want)
	}
	d.Run(b.ctx)
	if got := waits[1:]; !slices.Equal(got, want) {
		t.Errorf("the waits after failed ticks = %v, want %v", got, want)
	}
	if first := waits[0]; first < 5*time.Millisecond || first > 6*time.Millisecond {
		t.Errorf("the first wait = %s, want the Interval plus at most a tenth", first)
	}
	if n := strings.Count(log.String(), `"msg":"schedule: drain: tick failed; backing off"`); n != len(want) {
		t.Errorf("%d failed ticks logged, want %d:\n%s", n, len(want), log.String())
	}
}

// TestTheDrainServesOrganizationsInTurn: one organization's 600
// per-minute schedules, three minutes behind, do not delay another's: its
// occurrence, due while the 1,800 wait, is planned and started within two
// ticks of the default batch (10). (Taken earliest first, as before issue
// 36, it waited for all 600 schedules to be planned, 60 ticks.)
func TestTheDrainServesOrganizationsInTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	every := "* * * * *"
	at := t0
	b.clock.Set(t0)
	for range 600 {
		b.schedule(t, b.search(t), SetParams{Cron: &every, StartAt: &at})
	}
	light := *b // the same database, another organization
	light.org = uuid.New()
	b.clock.Set(t0.Add(2 * time.Minute))
	id := light.search(t)
	light.schedule(t, id, SetParams{Cron: &every})
	due := t0.Add(2 * time.Minute)
	d := b.drain(t, drainOpts{})
	for tick := 1; tick <= 2; tick++ {
		b.tick(t, d)
		if n := light.runsOf(t, id, due); n == 1 {
			return
		}
	}
	var planned int
	if err := b.db.QueryRow(b.ctx, `SELECT count(*) FROM agent.schedule_occurrences`).Scan(&planned); err != nil {
		t.Fatal(err)
	}
	t.Errorf("after two ticks the light organization's occurrence due at %s has no Run (%d occurrences planned in all)", due, planned)
}

// TestATickStartsWidthAtOnce: a tick's starts run Width at once (issue 36:
// one at a time, the drain managed 6.5 starts/s against 10 due). Four
// starts that each wait for all four to be in flight finish only when
// they run together.
func TestATickStartsWidthAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	every := "* * * * *"
	at := t0
	b.clock.Set(t0)
	for range 4 {
		b.schedule(t, b.search(t), SetParams{Cron: &every, StartAt: &at})
	}
	var inFlight atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	d := b.drain(t, drainOpts{start: func(ctx context.Context, p admission.SavedSearchStart) (admission.Result, error) {
		if inFlight.Add(1) == 4 {
			once.Do(func() { close(all) })
		}
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			return admission.Result{}, errs.Wrap(errs.Unavailable, errors.New("the other starts never came"))
		}
		return b.starter.StartSavedSearch(ctx, p)
	}})
	if rep := b.tick(t, d); rep.Started != 4 {
		t.Errorf("a tick of 4 occurrences at the default width: %+v, want 4 started together", rep)
	}
}

// TestScheduledRunsStartWithTheScheduleOptions: a schedule's max_results
// and note are its Runs' options, as a client's start gives them; an
// occurrence keeps those its schedule had when it came due, so one whose
// first attempt failed starts with them though the schedule changed
// since (every attempt of one occurrence is one request of its key).
func TestScheduledRunsStartWithTheScheduleOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.search(t)
	p := hourly()
	seven, note := 7, "weekly digest"
	p.MaxResults, p.Note = &seven, &note
	if sc := b.schedule(t, id, p); sc.MaxResults != 7 || sc.Note != note {
		t.Fatalf("schedule options = %d %q, want 7 %q", sc.MaxResults, sc.Note, note)
	}
	options := func(at time.Time) admission.StartOptions {
		t.Helper()
		o := b.occ(t, id, at)
		if o.runID == nil {
			t.Fatalf("occurrence at %s has no Run: %+v", at, o)
		}
		run, err := b.runs.Get(b.ctx, b.org, *o.runID)
		if err != nil {
			t.Fatal(err)
		}
		var got admission.StartOptions
		if err := json.Unmarshal(run.Options, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	b.clock.Set(t0)
	if rep := b.tick(t, b.drain(t, drainOpts{})); rep.Started != 1 {
		t.Fatalf("tick = %+v, want one started", rep)
	}
	if got := options(t0); got != (admission.StartOptions{MaxResults: 7, Note: note}) {
		t.Errorf("the scheduled Run's options = %+v, want the schedule's", got)
	}

	// The next occurrence's first attempt fails; the schedule's options
	// change; the retry starts with the options it came due with.
	b.clock.Set(t0.Add(time.Hour))
	failing := b.drain(t, drainOpts{start: func(context.Context, admission.SavedSearchStart) (admission.Result, error) {
		return admission.Result{}, errors.New("the database went away")
	}})
	if rep := b.tick(t, failing); rep.Started != 0 {
		t.Fatalf("the failing tick started %d", rep.Started)
	}
	other := 3
	p.MaxResults, p.Note = &other, nil
	if sc := b.schedule(t, id, p); sc.MaxResults != 3 || sc.Note != "" {
		t.Fatalf("schedule options after the change = %d %q, want 3 and none", sc.MaxResults, sc.Note)
	}
	b.clock.Set(t0.Add(2*time.Hour - time.Second))
	if _, err := b.db.Exec(b.ctx, `UPDATE agent.schedule_occurrences SET next_attempt_at = $1, lease_token = NULL
		WHERE saved_search_id = $2 AND due_at = $3`, t0.Add(time.Hour), id, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if rep := b.tick(t, b.drain(t, drainOpts{})); rep.Started < 1 {
		t.Fatalf("the retry tick = %+v, want the occurrence started", rep)
	}
	if got := options(t0.Add(time.Hour)); got != (admission.StartOptions{MaxResults: 7, Note: note}) {
		t.Errorf("the retried occurrence's Run options = %+v, want those it came due with", got)
	}
}
