package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/runs"
)

// dispatchNotice is the notice every page carries while this process does
// not dispatch and Runs are pending: an operator reads the count and the
// oldest age (of every organization's Runs), an auditor that their Runs
// may stay queued.
type dispatchNotice struct {
	Operator bool
	Pending  int64
	Oldest   time.Duration
}

// dispatchNotice returns the notice for s, nil when there is none.
func (c *Console) dispatchNotice(s *session) *dispatchNotice {
	if s == nil || c.d.Backlog == nil {
		return nil
	}
	b := c.d.Backlog.Backlog()
	if !b.Stranded() {
		return nil
	}
	return &dispatchNotice{Operator: s.IsOperator(), Pending: b.Pending, Oldest: b.OldestPending}
}

// timelineEvent is one line of a Run's timeline: when, what (a badge and
// its class, one the stylesheet has), and the detail.
type timelineEvent struct {
	At                         time.Time
	What, Badge, Class, Detail string
	// Answer is a runtime's answer or an error, shown as code.
	Answer string
	// Who did it (an operator, a runtime), when known.
	Who string
}

// runTimeline is the Run page's timeline: the Run's dispatch, and every
// event of its life in order.
type runTimeline struct {
	Dispatch *dispatch.Dispatch
	// Retries are the operators' retries of the dispatch, oldest first.
	Retries []dispatch.Retry
	Events  []timelineEvent
	// Pruned counts the attempts older than the kept ones.
	Pruned int
}

// timeline reads and orders a Run's life: its admission, each delivery
// attempt with its answer, the operators' retries, and each status change
// (the dispatcher's dispatched, the runtime's reports).
func (c *Console) timeline(ctx context.Context, run *runs.Run, now time.Time) (*runTimeline, error) {
	org, id := run.OrganizationID, run.ID
	changes, err := c.d.Runs.StatusChanges(ctx, org, id)
	if err != nil {
		return nil, err
	}
	tl := &runTimeline{Events: []timelineEvent{{At: run.CreatedAt, What: "admitted", Badge: runs.StatusQueued, Class: "b-queued",
		Detail: "with its dispatch to the runtime, in one commit", Who: deref(run.CreatedBy)}}}
	d, err := c.d.Dispatches.Get(ctx, org, id)
	if err != nil && !errors.Is(err, dispatch.ErrNotFound) {
		return nil, err
	}
	tl.Dispatch = d
	if d != nil {
		attempts, err := c.d.Dispatches.Attempts(ctx, org, id)
		if err != nil {
			return nil, err
		}
		if tl.Retries, err = c.d.Dispatches.Retries(ctx, org, id); err != nil {
			return nil, err
		}
		if len(attempts) > 0 {
			tl.Pruned = attempts[0].Attempt - 1
		}
		for _, a := range attempts {
			tl.Events = append(tl.Events, attemptEvent(a, d, now))
		}
		for _, r := range tl.Retries {
			tl.Events = append(tl.Events, timelineEvent{At: r.RetriedAt, What: "retried", Badge: "retry", Class: "b-changed",
				Detail: r.Reason, Who: r.Actor, Answer: deref(r.PreviousError)})
		}
	}
	for _, ch := range changes {
		tl.Events = append(tl.Events, statusEvent(ch))
	}
	// In the order they happened; an admission first, an attempt before
	// the status change its answer made at the same instant.
	slices.SortStableFunc(tl.Events, func(a, b timelineEvent) int { return a.At.Compare(b.At) })
	return tl, nil
}

// statusEvent is the line of one status change: the dispatcher's
// dispatched, or a runtime's report.
func statusEvent(ch runs.StatusChange) timelineEvent {
	ev := timelineEvent{At: ch.ChangedAt, What: "status", Badge: ch.Status, Class: "b-" + ch.Status,
		Detail: "version " + strconv.FormatInt(ch.Version, 10)}
	if ch.Reporter != nil {
		ev.What, ev.Who = "reported", *ch.Reporter
	} else {
		ev.Detail += ": the runtime acknowledged the delivery"
	}
	if ch.ResultRef != nil {
		ev.Answer = "result: " + *ch.ResultRef
	}
	if ch.Error != nil {
		ev.Answer = "error: " + ch.Error.Code
		if ch.Error.Message != nil {
			ev.Answer += ": " + *ch.Error.Message
		}
	}
	return ev
}

// attemptEvent is the line of one delivery attempt.
func attemptEvent(a dispatch.Attempt, d *dispatch.Dispatch, now time.Time) timelineEvent {
	ev := timelineEvent{At: a.StartedAt, What: "delivery " + strconv.Itoa(a.Attempt), Badge: string(a.Outcome)}
	switch a.Outcome {
	case dispatch.OutcomeDelivered:
		ev.Class, ev.Detail = "b-succeeded", "the runtime took the Run"
	case dispatch.OutcomeRetry:
		ev.Class, ev.Detail = "b-duplicate", "to be delivered again after a backoff"
	case dispatch.OutcomeFailed:
		ev.Class, ev.Detail = "b-failed", "refused: not retried until an operator retries it"
	default:
		// In flight, or cut short: a later attempt exists, or the lease of
		// this, the latest, has passed.
		ev.Class, ev.Detail = "b-running", "in flight"
		if a.Attempt < d.Attempts || d.State != dispatch.StatePending || (d.NextAttemptAt != nil && !now.Before(*d.NextAttemptAt)) {
			ev.Badge, ev.Class = "cut short", "b-stuck"
			ev.Detail = "no answer recorded: its dispatcher stopped or stalled past its lease, and the Run was delivered again"
		}
	}
	if a.EndedAt != nil {
		ev.Detail += fmt.Sprintf(" (%s)", humanDuration(a.EndedAt.Sub(a.StartedAt)))
	}
	if a.StatusCode != nil || a.Answer != nil {
		ev.Answer = cmp.Or(deref(a.Answer), strconv.Itoa(deref(a.StatusCode)))
	}
	return ev
}

func deref[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}
