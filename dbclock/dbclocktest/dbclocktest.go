// Package dbclocktest provides a database clock that tests move by hand.
package dbclocktest

import (
	"sync"
	"time"

	"github.com/searchd/searchd/dbclock"
)

// Stub is a database clock moved by hand: every statement of a component
// built on [Stub.Clock] runs at [Stub.Now], so tests pass leases without
// sleeping. It is safe for concurrent use.
type Stub struct {
	mu    sync.Mutex
	t     time.Time
	clock *dbclock.Clock
}

// New returns a stub that reads t until it is moved.
func New(t time.Time) *Stub {
	s := &Stub{t: t}
	s.clock = dbclock.Stub(s.Now)
	return s
}

// Clock returns the database clock to hand to every component of the
// test, the same value on every call.
func (s *Stub) Clock() *dbclock.Clock { return s.clock }

// Now returns the stub's time.
func (s *Stub) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

// Advance moves the stub's time by d.
func (s *Stub) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = s.t.Add(d)
}

// Set moves the stub's time to t.
func (s *Stub) Set(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = t
}
