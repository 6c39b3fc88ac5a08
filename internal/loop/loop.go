// Package loop runs the server's background loops: a pass every interval
// with jitter, a doubling back-off after failures, an early wake on a
// signal, until the context ends.
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
	Now bool // run the next pass at once
	// Wait, when positive, replaces the Interval, without jitter.
	Wait time.Duration
	// Wake, when set, also ends the wait.
	Wake <-chan struct{}
}

// Loop is the schedule of a background loop. Every wait but First and
// [Next.Wait] gets up to a tenth more at random, so replicas drift apart.
type Loop struct {
	// Interval is the wait after a pass that succeeded.
	Interval time.Duration
	// Backoff is the wait after a failed pass, doubling with each failure
	// in a row up to MaxBackoff. Zero is the Interval.
	Backoff, MaxBackoff time.Duration
	// First is the wait before the first pass.
	First time.Duration
	// Wake ends any wait early; nil never does.
	Wake <-chan struct{}
	// Failed, when set, is told of each failed pass and the back-off that
	// follows (unless the context has ended).
	Failed func(ctx context.Context, err error, next time.Duration)
	// Clock, for tests, replaces every wait (timer and wake signals): it
	// gets the wait before jitter, and returning false ends the loop.
	Clock func(ctx context.Context, d time.Duration) bool
}

// Run runs pass, then again after each wait, until ctx ends; it returns
// after the pass in progress returns.
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

// wait waits d or until a wake signal, and reports whether the loop goes
// on.
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
