// Package dbclock is the database clock every component reads "now" from.
//
// Leases, retention and timestamps are compared in SQL against the
// database's now(), so replicas with skewed clocks still agree. A statement
// writes coalesce($now::timestamptz, now()) and takes [Clock.Arg]:
// production passes NULL, a test its stub's time. One Clock is built once
// and handed to every component; components built on another (admission's
// Starter, the provider jobs) use that one's clock.
package dbclock

import "time"

// Clock is the database clock. The nil *Clock is the database's now(),
// used in production; a non-nil one, made by [Stub], is a test's stub.
// Components share a clock when they hold the same *Clock (compare with ==).
type Clock struct {
	now func() time.Time
}

// Stub returns a clock at now(), for tests; a nil now returns the nil
// Clock.
func Stub(now func() time.Time) *Clock {
	if now == nil {
		return nil
	}
	return &Clock{now: now}
}

// Arg is the $now argument: nil (SQL NULL) for the nil Clock, else the
// stub's time.
func (c *Clock) Arg() any {
	if c == nil {
		return nil
	}
	return c.now()
}

// Now is the stub's time, or the local clock for the nil Clock. Use it
// only for comparisons that decide neither ownership nor retention.
func (c *Clock) Now() time.Time {
	if c == nil {
		return time.Now()
	}
	return c.now()
}

// Stubbed reports whether c is a stub rather than the database's clock.
func (c *Clock) Stubbed() bool { return c != nil }
