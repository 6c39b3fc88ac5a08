package dbclock_test

import (
	"testing"
	"time"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/dbclock/dbclocktest"
)

// TestNilClockIsTheDatabases: production's nil clock passes NULL, so the
// SQL's coalesce($now, now()) takes the database's now(); a stub passes its
// time, and moves only when the test moves it.
func TestNilClockIsTheDatabases(t *testing.T) {
	t.Parallel()
	var db *dbclock.Clock
	if arg := db.Arg(); arg != nil || db.Stubbed() {
		t.Errorf("nil Clock: Arg() = %v, Stubbed() = %v; want nil (SQL NULL) and false", arg, db.Stubbed())
	}
	if d := time.Since(db.Now()); d < 0 || d > time.Minute {
		t.Errorf("nil Clock: Now() is %s from the wall clock, want the wall clock", d)
	}
	if c := dbclock.Stub(nil); c != nil {
		t.Errorf("Stub(nil) = %v, want the nil Clock", c)
	}

	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	s := dbclocktest.New(at)
	c := s.Clock()
	if c != s.Clock() || !c.Stubbed() {
		t.Fatalf("Stub.Clock() = %p then %p (stubbed %v); want one stubbed value", c, s.Clock(), c.Stubbed())
	}
	if arg, ok := c.Arg().(time.Time); !ok || !arg.Equal(at) || !c.Now().Equal(at) {
		t.Errorf("stub at %v: Arg() = %v, Now() = %v", at, c.Arg(), c.Now())
	}
	s.Advance(time.Second)
	if want := at.Add(time.Second); !c.Now().Equal(want) {
		t.Errorf("after Advance(1s): Now() = %v, want %v", c.Now(), want)
	}
	s.Set(at)
	if !c.Now().Equal(at) {
		t.Errorf("after Set(%v): Now() = %v", at, c.Now())
	}
}
