package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/runs"
)

// cancelOf returns the cancel request the runtime got for run, decoded,
// and how many it got.
func cancelOf(rt *runtime, runID uuid.UUID) (msg dispatch.CancelMessage, n int) {
	for _, d := range rt.got() {
		if d.id == dispatch.CancelMessageID(runID) {
			n++
			_ = json.Unmarshal(d.body, &msg)
		}
	}
	return msg, n
}

// runMessages counts the Run messages (not cancels) the runtime got for run.
func runMessages(rt *runtime, runID uuid.UUID) (n int) {
	for _, d := range rt.got() {
		if d.id == runID.String() {
			n++
		}
	}
	return n
}

// TestCancelBeforeDispatchIsNeverDelivered: cancels race two dispatchers
// delivering the same Runs, with real commits. Every cancel either
// cancels the Run at once, and then no delivery of it is ever recorded (its
// dispatch is cancelled, its status history has no dispatched) and a
// runtime that got its message anyway (an attempt in flight when the
// cancel committed) gets a cancel request after it; or finds the Run
// dispatched, and then the Run stays dispatched with one cancel request
// sent. No Run is both cancelled before dispatch and delivered.
func TestCancelBeforeDispatchIsNeverDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.store = dispatch.NewStore(b.db, nil) // the database's clock: time runs
	b.runs = runs.NewStore(b.db, runs.Config{})
	rt := newRuntime(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(2 * time.Millisecond) // a window for an attempt in flight
		w.WriteHeader(http.StatusOK)
	})
	const n = 150
	all := make([]*runs.Run, n)
	for i := range all {
		all[i] = b.admit(t, b.org)
	}
	ctx, stop := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	for range 2 {
		d := b.dispatcher(t, rt.srv.URL, func(c *dispatch.Config) {
			c.Batch, c.Concurrency, c.Interval = 5, 4, 10*time.Millisecond
			c.MinBackoff, c.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
		})
		wg.Go(func() {
			if err := d.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	// Cancel every other Run, newest first (the dispatchers take the
	// oldest first), from two goroutines: the cancels meet Runs due,
	// leased, in flight and delivered.
	answers := make([]*runs.Run, n)
	var cwg sync.WaitGroup
	for g := range 2 {
		cwg.Go(func() {
			for i := n - 1 - 2*g; i >= 0; i -= 4 {
				r, err := b.runs.Cancel(b.ctx, b.org, all[i].ID, runs.CancelRequest{Actor: "alice", Reason: "changed my mind"})
				if err != nil {
					t.Errorf("Cancel(%s) = %v", all[i].ID, err)
					continue
				}
				answers[i] = r
				time.Sleep(time.Millisecond)
			}
		})
	}
	cwg.Wait()
	// Let the dispatchers deliver what is left: every Run message and
	// every cancel request due.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var pending int
		if err := b.db.QueryRow(b.ctx, `SELECT (SELECT count(*) FROM agent.run_dispatches WHERE state = 'pending')
			+ (SELECT count(*) FROM agent.run_cancels WHERE state = 'pending')`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()

	var atOnce, atOnceSeen, requested int
	for i, run := range all {
		got := answers[i]
		dd := b.get(t, run)
		changes, err := b.runs.StatusChanges(b.ctx, b.org, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		cmsg, cancels := cancelOf(rt, run.ID)
		switch {
		case got == nil: // not cancelled
			if dd.State != dispatch.StateDispatched || runMessages(rt, run.ID) != 1 || cancels != 0 {
				t.Errorf("uncancelled Run %s: dispatch %s, %d messages, %d cancels; want dispatched, 1, 0",
					run.ID, dd.State, runMessages(rt, run.ID), cancels)
			}
		case got.Status == runs.StatusCancelled:
			atOnce++
			if dd.State != dispatch.StateCancelled || len(changes) != 1 || changes[0].Status != runs.StatusCancelled ||
				deref(changes[0].Reporter) != "alice" {
				t.Errorf("Run %s cancelled before dispatch, yet its dispatch is %s and its history %+v: delivered after the cancel",
					run.ID, dd.State, changes)
			}
			if cur, _ := b.runs.Get(b.ctx, b.org, run.ID); cur.Status != runs.StatusCancelled {
				t.Errorf("Run %s cancelled before dispatch is %s afterwards", run.ID, cur.Status)
			}
			if m := runMessages(rt, run.ID); m > 0 {
				atOnceSeen++
				if cancels != 1 || cmsg.Type != dispatch.CancelMessageType || cmsg.Data.Run.ID != run.ID {
					t.Errorf("Run %s reached the runtime (%d messages) before its cancel committed, and got %d cancel requests (%+v), want 1",
						run.ID, m, cancels, cmsg)
				}
			}
		case got.Status == runs.StatusDispatched && got.CancelRequestedAt != nil:
			requested++
			if dd.State != dispatch.StateDispatched || runMessages(rt, run.ID) != 1 || cancels != 1 {
				t.Errorf("Run %s dispatched when cancelled: dispatch %s, %d messages, %d cancel requests; want dispatched, 1, 1",
					run.ID, dd.State, runMessages(rt, run.ID), cancels)
			}
		default:
			t.Errorf("Cancel(%s) = status %s, cancel requested %v; want cancelled, or dispatched with the request",
				run.ID, got.Status, got.CancelRequestedAt)
		}
	}
	t.Logf("%d cancelled before dispatch (%d of them had reached the runtime in flight), %d dispatched first", atOnce, atOnceSeen, requested)
	if atOnce == 0 {
		t.Error("no cancel met a Run before its dispatch: the race was not exercised")
	}
}

// TestCancelAfterDispatchSendsOneSignedRequest: a dispatched Run's cancel
// is recorded and sent to the runtime once (signed, told apart from the
// Run's message by its type and webhook-id), retried until the runtime
// takes it; the Run stays dispatched until the runtime reports cancelled.
func TestCancelAfterDispatchSendsOneSignedRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var cancelsSeen atomic.Int32
	rt := newRuntime(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("webhook-id"), "cancel_") && cancelsSeen.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable) // the first cancel request: retry
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	d := b.dispatcher(t, rt.srv.URL, nil)
	run := b.admit(t, b.org)
	if out := d.Deliver(b.ctx, b.lease(t, 1)[0]); out != dispatch.OutcomeDelivered {
		t.Fatalf("Deliver = %q", out)
	}
	got, err := b.runs.Cancel(b.ctx, b.org, run.ID, runs.CancelRequest{Actor: "alice", Reason: "wrong query"})
	if err != nil || got.Status != runs.StatusDispatched || got.CancelRequestedAt == nil || got.Version != 2 {
		t.Fatalf("Cancel = %+v, %v; want the Run dispatched, version 2, with its cancel requested", got, err)
	}
	again, err := b.runs.Cancel(b.ctx, b.org, run.ID, runs.CancelRequest{Actor: "bob"})
	if err != nil || again.Version != 2 || !again.CancelRequestedAt.Equal(*got.CancelRequestedAt) {
		t.Fatalf("second Cancel = %+v, %v; want the same Run", again, err)
	}
	// The first attempt gets a 503 and is retried after its back-off.
	l := b.lease(t, 10)
	if len(l) != 1 || !l[0].Cancel || l[0].RunID != run.ID {
		t.Fatalf("LeasePass = %+v, want the one cancel request", l)
	}
	if out := d.Deliver(b.ctx, l[0]); out != dispatch.OutcomeRetry {
		t.Fatalf("Deliver(cancel) = %q, want retry after a 503", out)
	}
	if l := b.lease(t, 10); len(l) != 0 {
		t.Fatalf("LeasePass during the back-off = %+v, want none", l)
	}
	b.clock.Advance(dispatch.DefaultMaxBackoff)
	l = b.lease(t, 10)
	if len(l) != 1 || !l[0].Cancel || l[0].Attempt != 2 {
		t.Fatalf("LeasePass after the back-off = %+v, want the cancel request's second attempt", l)
	}
	if out := d.Deliver(b.ctx, l[0]); out != dispatch.OutcomeDelivered {
		t.Fatalf("Deliver(cancel) = %q, want delivered", out)
	}
	b.clock.Advance(time.Hour)
	if l := b.lease(t, 10); len(l) != 0 {
		t.Fatalf("LeasePass after the delivery = %+v, want none: a cancel is sent until taken, then never", l)
	}
	msg, n := cancelOf(rt, run.ID)
	if n != 2 || msg.Type != "run.cancel_requested" || msg.Data.Run.ID != run.ID || msg.Data.Run.OrganizationID != b.org ||
		deref(msg.Data.Reason) != "wrong query" || msg.Data.StatusURL != "/v1/runs/"+run.ID.String()+"/status" ||
		!msg.Timestamp.Equal(*got.CancelRequestedAt) {
		t.Errorf("cancel requests = %d, last %+v; want 2 attempts of one request with the first cancel's reason", n, msg)
	}
	c, err := b.store.GetCancel(b.ctx, b.org, run.ID)
	if err != nil || c.State != dispatch.CancelDelivered || c.Attempts != 2 || deref(c.RequestedBy) != "alice" {
		t.Errorf("GetCancel = %+v, %v; want delivered after 2 attempts, asked by alice", c, err)
	}
	if cur, _ := b.runs.Get(b.ctx, b.org, run.ID); cur.Status != runs.StatusDispatched {
		t.Errorf("Run is %s before the runtime reports, want dispatched", cur.Status)
	}
	// The runtime reports it cancelled: now it is.
	rep, _, err := b.runs.Report(b.ctx, b.org, run.ID, runs.StatusReport{Status: runs.StatusCancelled, Reporter: "runtime"})
	if err != nil || rep.Status != runs.StatusCancelled || rep.Version != 3 {
		t.Fatalf("Report(cancelled) = %+v, %v", rep, err)
	}
	if again, err := b.runs.Cancel(b.ctx, b.org, run.ID, runs.CancelRequest{}); err != nil || again.Version != 3 {
		t.Errorf("Cancel of a cancelled Run = %+v, %v; want it as it is", again, err)
	}
}

// TestCancelOfAFinishedRunIsRefused: a Run that succeeded or failed
// answers run_finished, also one whose runtime finished it after a cancel
// request (it keeps how it finished); another organization's Run is not
// found, and a reason too long is refused.
func TestCancelOfAFinishedRunIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rt := newRuntime(t, nil)
	d := b.dispatcher(t, rt.srv.URL, nil)
	deliver := func() *runs.Run {
		run := b.admit(t, b.org)
		for _, l := range b.lease(t, 10) { // a cancel request due, and the Run
			if out := d.Deliver(b.ctx, l); out != dispatch.OutcomeDelivered {
				t.Fatalf("Deliver(%+v) = %q", l, out)
			}
		}
		if dd := b.get(t, run); dd.State != dispatch.StateDispatched {
			t.Fatalf("dispatch = %s, want dispatched", dd.State)
		}
		return run
	}
	succeeded := deliver()
	if _, err := b.runs.Cancel(b.ctx, b.org, succeeded.ID, runs.CancelRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.runs.Report(b.ctx, b.org, succeeded.ID, runs.StatusReport{Status: runs.StatusSucceeded}); err != nil {
		t.Fatalf("Report(succeeded) after a cancel request = %v; the runtime finishing first wins", err)
	}
	failed := deliver()
	if _, _, err := b.runs.Report(b.ctx, b.org, failed.ID, runs.StatusReport{Status: runs.StatusFailed,
		Error: &runs.RunError{Code: "boom"}}); err != nil {
		t.Fatal(err)
	}
	for _, run := range []*runs.Run{succeeded, failed} {
		_, err := b.runs.Cancel(b.ctx, b.org, run.ID, runs.CancelRequest{})
		var fe *runs.FinishedError
		if !errors.As(err, &fe) || fe.ErrorCode() != "run_finished" || errs.KindOf(err) != errs.Conflict {
			t.Errorf("Cancel of a finished Run = %v, want run_finished", err)
		}
	}
	if cur, _ := b.runs.Get(b.ctx, b.org, succeeded.ID); cur.Status != runs.StatusSucceeded {
		t.Errorf("Run succeeded after a cancel request is %s, want succeeded", cur.Status)
	}
	queued := b.admit(t, b.org)
	if _, err := b.runs.Cancel(b.ctx, uuid.New(), queued.ID, runs.CancelRequest{}); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Cancel of another organization's Run = %v, want ErrNotFound", err)
	}
	long := make([]byte, runs.MaxCancelReasonLen+1)
	for i := range long {
		long[i] = 'x'
	}
	if _, err := b.runs.Cancel(b.ctx, b.org, queued.ID, runs.CancelRequest{Reason: string(long)}); !errors.Is(err, runs.ErrInvalid) {
		t.Errorf("Cancel with a reason too long = %v, want ErrInvalid", err)
	}
	// Before any attempt: cancelled at once, nothing to tell the runtime.
	got, err := b.runs.Cancel(b.ctx, b.org, queued.ID, runs.CancelRequest{Actor: "alice"})
	if err != nil || got.Status != runs.StatusCancelled || got.Version != 2 {
		t.Fatalf("Cancel of a queued Run = %+v, %v; want cancelled, version 2", got, err)
	}
	if c, err := b.store.GetCancel(b.ctx, b.org, queued.ID); err != nil || c.State != dispatch.CancelSkipped {
		t.Errorf("GetCancel = %+v, %v; want skipped", c, err)
	}
	if l := b.lease(t, 10); len(l) != 0 {
		t.Errorf("LeasePass after the cancel = %+v, want nothing to deliver", l)
	}
}
