// Package dbclock is the one database clock every component of searchd
// reads "now" from.
//
// Every comparison of leases, retention and timestamps runs in SQL against
// the database's now(), so replicas whose clocks disagree still agree on who
// owns a key and what has expired. A statement takes the clock as an
// optional argument and writes coalesce($now::timestamptz, now()): production
// passes NULL, a test passes the time of its stub.
//
// The clock is one value, built once and handed to every component that
// runs such statements (the idempotency plane, the Run store, the sweeper,
// the operator and tool stores), the way river's baseservice.Archetype hands
// one time generator to every service. The components built on another
// (admission's Starter on the plane and the Run store, the provider jobs on
// the plane) take no clock of their own: they run at the clock of what they
// are built on, and the Starter refuses a plane and a Run store on
// different clocks, so a test cannot stub one and forget another.
package dbclock

import "time"

// Clock is the database clock. The nil *Clock is the database's own now():
// production hands nil to every component. A non-nil Clock, made by [Stub],
// runs every statement at the stub's time, for tests.
//
// Two components share a clock when they hold the same *Clock; compare
// them with ==.
type Clock struct {
	now func() time.Time
}

// Stub returns a clock whose time is now(), for tests; the Stub of package
// dbclocktest is one that tests move by hand. A nil now returns the nil
// Clock, the database's.
func Stub(now func() time.Time) *Clock {
	if now == nil {
		return nil
	}
	return &Clock{now: now}
}

// Arg is the $now argument of a statement: nil (SQL NULL, so
// coalesce($now, now()) takes the database's now()) for the nil Clock, the
// stub's time otherwise.
func (c *Clock) Arg() any {
	if c == nil {
		return nil
	}
	return c.now()
}

// Now is the time for the rare comparison made in Go rather than in SQL:
// the stub's time, or the local wall clock for the nil Clock. Anything that
// decides ownership or retention compares in SQL instead.
func (c *Clock) Now() time.Time {
	if c == nil {
		return time.Now()
	}
	return c.now()
}

// Stubbed reports whether c is a stub rather than the database's clock.
func (c *Clock) Stubbed() bool { return c != nil }
