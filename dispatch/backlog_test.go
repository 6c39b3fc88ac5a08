package dispatch_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// backlogSeen records what a Watcher reports.
type backlogSeen struct {
	mu          sync.Mutex
	reads       int
	pending     int64
	oldest      time.Duration
	dispatching []bool
}

func (o *backlogSeen) ObserveDispatchBacklog(pending, _ int64, oldest time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	o.pending, o.oldest = pending, oldest
}

func (o *backlogSeen) ObserveDispatching(on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dispatching = append(o.dispatching, on)
}

func (o *backlogSeen) readCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reads
}

// warnedMsg is the message of the Watcher's warning.
const warnedMsg = "dispatch is off on this replica and Runs are waiting for it: they stay queued " +
	"until a replica with a runtime delivers them; set THE_SETTINGS"

// TestWatcherCountsAndWarnsWhileDispatchIsOff is issue 35.6: a process
// that does not dispatch still reads the shared outbox's backlog (three
// Runs admitted, the oldest two minutes ago), reports it, says it does not
// dispatch, and warns at the first read and again only once WarnEvery has
// passed, naming the count and the settings, however often it reads.
func TestWatcherCountsAndWarnsWhileDispatchIsOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.admit(t, b.org)
	b.clock.Advance(time.Minute)
	b.admit(t, b.org)
	b.admit(t, b.org)
	b.clock.Advance(time.Minute)
	var log pgtest.SyncBuffer
	seen := &backlogSeen{}
	const warnEvery = 100 * time.Millisecond
	w, err := dispatch.NewWatcher(b.store, dispatch.WatchConfig{Interval: 5 * time.Millisecond, WarnEvery: warnEvery,
		Remedy: "set THE_SETTINGS", Logger: slog.New(slog.NewJSONHandler(&log, nil)), Observer: seen})
	if err != nil {
		t.Fatal(err)
	}
	if b := w.Backlog(); b.Read || b.Dispatching {
		t.Errorf("Backlog before a read = %+v, want not read, not dispatching", b)
	}
	at := pgtest.RunUntilLogged[time.Time](func(ctx context.Context) { _ = w.Run(ctx) }, &log, warnedMsg, "time", 2)
	if len(at) < 2 {
		t.Fatalf("%d warnings within 20 s, want 2:\n%s", len(at), log.String())
	}
	if gap := at[1].Sub(at[0]); gap < warnEvery {
		t.Errorf("the warning was repeated after %s, want no sooner than WarnEvery (%s)", gap, warnEvery)
	}
	if !strings.Contains(log.String(), `"level":"WARN","msg":"`+warnedMsg+`","pending":3,"oldest":120000000000`) {
		t.Errorf("the warning is not at WARN naming 3 pending, the oldest 2m:\n%s", log.String())
	}
	got := w.Backlog()
	if !got.Read || got.Dispatching || got.Pending != 3 || got.OldestPending != 2*time.Minute || !got.Stranded() {
		t.Errorf("Backlog = %+v, want 3 pending, the oldest 2m, read, stranded, not dispatching", got)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if seen.pending != 3 || seen.oldest != 2*time.Minute || len(seen.dispatching) != 1 || seen.dispatching[0] {
		t.Errorf("observed %d pending, oldest %s, dispatching %v; want 3, 2m, [false]", seen.pending, seen.oldest, seen.dispatching)
	}
}

// TestWatcherOfADispatcherDoesNotWarn: a process that dispatches reports
// the same backlog but never warns of it; so does one with nothing
// pending.
func TestWatcherOfADispatcherDoesNotWarn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		dispatching bool
		admit       int
	}{
		{"dispatching, Runs pending", true, 2},
		{"not dispatching, nothing pending", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			for range tc.admit {
				b.admit(t, b.org)
			}
			var log pgtest.SyncBuffer
			seen := &backlogSeen{}
			w, err := dispatch.NewWatcher(b.store, dispatch.WatchConfig{Dispatching: tc.dispatching,
				Interval: 5 * time.Millisecond, WarnEvery: 5 * time.Millisecond,
				Logger: slog.New(slog.NewJSONHandler(&log, nil)), Observer: seen})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(b.ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = w.Run(ctx) }()
			for deadline := time.Now().Add(20 * time.Second); seen.readCount() < 5 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			<-done
			if n := seen.readCount(); n < 5 {
				t.Fatalf("%d reads within 20 s, want 5", n)
			}
			if strings.Contains(log.String(), "dispatch is off") {
				t.Errorf("warned:\n%s", log.String())
			}
			if got := w.Backlog(); got.Pending != int64(tc.admit) || got.Stranded() || got.Dispatching != tc.dispatching {
				t.Errorf("Backlog = %+v, want %d pending, not stranded", got, tc.admit)
			}
		})
	}
}

func TestNewWatcherRefusesAnIntervalOutOfRange(t *testing.T) {
	t.Parallel()
	store := dispatch.NewStore(nil, nil) // refused before any SQL
	for _, c := range []dispatch.WatchConfig{{Interval: -time.Second}, {WarnEvery: 2 * time.Hour}} {
		if _, err := dispatch.NewWatcher(store, c); err == nil || !strings.Contains(err.Error(), "WatchConfig.") {
			t.Errorf("NewWatcher(%+v) = %v, want an error naming the field", c, err)
		}
	}
}
