package loop

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// script runs l on passes that fail where fails says, with a stub clock
// that records each wait and ends the loop once every pass has run. It
// returns the waits and the back-offs told to Failed.
func script(t *testing.T, l Loop, fails []bool, next Next) (waits, told []time.Duration) {
	t.Helper()
	i := 0
	l.Clock = func(_ context.Context, d time.Duration) bool {
		waits = append(waits, d)
		return i < len(fails)
	}
	l.Failed = func(_ context.Context, err error, d time.Duration) {
		if err == nil {
			t.Error("Failed told of a nil error")
		}
		told = append(told, d)
	}
	l.Run(context.Background(), func(context.Context) (Next, error) {
		i++
		if fails[i-1] {
			return Next{}, errors.New("down")
		}
		return next, nil
	})
	return waits, told
}

// TestTheBackoffDoublesToItsCapAndResets: failed passes in a row wait
// Backoff, twice as long each time up to MaxBackoff; a pass that succeeds
// waits the Interval, and the next failure starts again from Backoff.
func TestTheBackoffDoublesToItsCapAndResets(t *testing.T) {
	l := Loop{Interval: 7, Backoff: 10, MaxBackoff: 40}
	waits, told := script(t, l, []bool{true, true, true, true, true, false, true}, Next{})
	want := []time.Duration{10, 20, 40, 40, 40, 7, 10}
	if !slices.Equal(waits, want) {
		t.Errorf("waits = %v, want %v", waits, want)
	}
	if wantTold := slices.Delete(slices.Clone(want), 5, 6); !slices.Equal(told, wantTold) {
		t.Errorf("Failed was told %v, want %v", told, wantTold)
	}
}

// TestTheBackoffDefaultsToTheInterval: with no Backoff the first failure
// waits the Interval; a cap below it keeps the wait from doubling.
func TestTheBackoffDefaultsToTheInterval(t *testing.T) {
	if waits, _ := script(t, Loop{Interval: 5, MaxBackoff: 30}, []bool{true, true, true, true}, Next{}); !slices.Equal(waits, []time.Duration{5, 10, 20, 30}) {
		t.Errorf("waits = %v, want 5 10 20 30", waits)
	}
	if waits, _ := script(t, Loop{Interval: 5}, []bool{true, true}, Next{}); !slices.Equal(waits, []time.Duration{5, 5}) {
		t.Errorf("waits without a cap = %v, want 5 5", waits)
	}
}

// TestAPassChoosesItsWait: First is waited before the first pass; a
// pass's Wait replaces the Interval; Now passes again with no wait.
func TestAPassChoosesItsWait(t *testing.T) {
	if waits, _ := script(t, Loop{Interval: 5, First: 3}, []bool{false, false}, Next{Wait: 9}); !slices.Equal(waits, []time.Duration{3, 9, 9}) {
		t.Errorf("waits = %v, want 3 (First), then 9 after each pass", waits)
	}
	n := 0
	var waits []time.Duration
	Loop{Interval: 5, Clock: func(_ context.Context, d time.Duration) bool { waits = append(waits, d); return false }}.Run(
		context.Background(), func(context.Context) (Next, error) { n++; return Next{Now: n < 3}, nil })
	if n != 3 || !slices.Equal(waits, []time.Duration{5}) {
		t.Errorf("%d passes and waits %v, want 3 passes at once, then the Interval", n, waits)
	}
}

// TestAWakeEndsTheWait: with a real clock and an hour's interval, a signal
// on Wake, or on the Wake of the pass's Next, runs the next pass, and the
// end of the context ends the loop in its wait.
func TestAWakeEndsTheWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	wake, slot := make(chan struct{}), make(chan struct{})
	passes := make(chan int)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n := 0
		Loop{Interval: time.Hour, Wake: wake}.Run(ctx, func(context.Context) (Next, error) {
			n++
			passes <- n
			return Next{Wake: slot}, nil
		})
	}()
	<-passes
	wake <- struct{}{}
	if n := <-passes; n != 2 {
		t.Fatalf("pass %d after a Wake, want 2", n)
	}
	slot <- struct{}{}
	if n := <-passes; n != 3 {
		t.Fatalf("pass %d after the pass's wake, want 3", n)
	}
	cancel()
	<-done
}

// TestAFailureAfterTheEndIsNotTold: a pass that fails because the context
// ended ends the loop, and Failed is not told.
func TestAFailureAfterTheEndIsNotTold(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	Loop{Interval: 1, Failed: func(context.Context, error, time.Duration) { t.Error("Failed told after the end") }}.Run(ctx,
		func(ctx context.Context) (Next, error) { cancel(); return Next{}, ctx.Err() })
}

// TestSleep: Sleep waits its duration and reports true, or reports false
// at once when its context has ended.
func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep(1ms) = false, want true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep on an ended context = true, want false")
	}
}
