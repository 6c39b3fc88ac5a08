// Package loop runs the server's background loops, and holds the one
// cancellable sleep.
//
// A [Loop] runs a pass, waits, and runs it again until its context ends:
// after a pass that succeeded it waits the Interval plus up to a tenth of
// it (so replicas do not poll in lock-step), or what the pass asked for
// ([Next]); after a failed pass it backs off, from Backoff doubling with
// each failure in a row up to MaxBackoff, so a database that is down is not
// polled in a loop. A signal on Wake ends any wait early. Each caller keeps
// its own pass logic; tests stub the waits with Clock.
package loop

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits d and reports true, or reports false as soon as ctx ends.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Jitter returns d plus a random delay of at most a tenth of d.
func Jitter(d time.Duration) time.Duration { return d + rand.N(d/10+1) }

// Next is what a pass that succeeded asks of the wait after it.
type Next struct {
	// Now runs the next pass at once (a pass that filled its batch).
	Now bool
	// Wait, when positive, is the wait instead of the Interval, taken as
	// it is, without jitter (a pass that plans its own wait).
	Wait time.Duration
	// Wake, when set, also ends the wait (a delivery slot freed).
	Wake <-chan struct{}
}

// Loop is the schedule of a background loop; [Loop.Run] runs it.
type Loop struct {
	// Interval is the wait after a pass that succeeded, plus up to a
	// tenth of it.
	Interval time.Duration
	// Backoff is the wait after a failed pass, doubling with each failed
	// pass in a row, at most MaxBackoff, plus up to a tenth of it. Zero
	// is the Interval; a MaxBackoff below it keeps the wait from doubling.
	Backoff, MaxBackoff time.Duration
	// First is the wait before the first pass, as it is; zero passes at
	// once.
	First time.Duration
	// Wake ends any wait early; nil never does.
	Wake <-chan struct{}
	// Failed, when set, is told of each failed pass (unless the context
	// has ended) and the back-off that follows, before its jitter: the
	// caller logs it.
	Failed func(ctx context.Context, err error, next time.Duration)
	// Clock, set by tests alone, replaces every wait: it is called with
	// the wait before its jitter, instead of the timer and the wake
	// signals, and returning false ends the loop. It is the stub clock.
	Clock func(ctx context.Context, d time.Duration) bool
}

// Run runs pass, then again after each wait, until ctx ends; a pass that
// returns an error failed. It returns when ctx ends, after the pass in
// progress returns.
func (l Loop) Run(ctx context.Context, pass func(context.Context) (Next, error)) {
	if l.First > 0 && !l.wait(ctx, l.First, false, nil) {
		return
	}
	failed := 0
	for ctx.Err() == nil {
		next, err := pass(ctx)
		if ctx.Err() != nil {
			return
		}
		d, jitter := next.Wait, false
		switch {
		case err != nil:
			d, jitter = l.backoff(failed), true
			failed++
			if l.Failed != nil {
				l.Failed(ctx, err, d)
			}
		case next.Now:
			failed = 0
			continue
		default:
			failed = 0
			if d <= 0 {
				d, jitter = l.Interval, true
			}
		}
		if !l.wait(ctx, d, jitter, next.Wake) {
			return
		}
	}
}

// backoff returns the wait after failed+1 failed passes in a row.
func (l Loop) backoff(failed int) time.Duration {
	b := l.Backoff
	if b <= 0 {
		b = l.Interval
	}
	ceiling := max(l.MaxBackoff, b)
	for ; failed > 0 && b < ceiling; failed-- {
		b *= 2
	}
	return min(b, ceiling)
}

// wait waits d (plus its jitter), until a wake signal, or until ctx ends,
// and reports whether the loop goes on.
func (l Loop) wait(ctx context.Context, d time.Duration, jitter bool, wake <-chan struct{}) bool {
	if l.Clock != nil {
		return l.Clock(ctx, d)
	}
	if jitter {
		d = Jitter(d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-l.Wake:
	case <-wake:
	}
	return true
}
