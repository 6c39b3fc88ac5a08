package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/searchd/searchd/internal/loop"
)

// Defaults and limits of a [WatchConfig].
const (
	// DefaultWatchInterval is how often a [Watcher] reads the backlog.
	DefaultWatchInterval = 15 * time.Second
	// DefaultWarnEvery is how often a [Watcher] of a process that does
	// not dispatch repeats its warning while Runs are pending.
	DefaultWarnEvery = 5 * time.Minute
	MaxWatchInterval = time.Hour
)

// BacklogObserver receives what a [Watcher] reads; *telemetry.Metrics is
// one. Its methods must not block.
type BacklogObserver interface {
	ObserveDispatchBacklog(pending, failed int64, oldest time.Duration)
	ObserveDispatching(on bool)
}

// WatchConfig configures a [Watcher]. The zero value of every field is its
// default.
type WatchConfig struct {
	// Dispatching reports whether this process runs a [Dispatcher]. The
	// backlog is read either way: the outbox is shared, and a process
	// that does not dispatch is the one that must say Runs are waiting.
	Dispatching bool
	// Interval is the time between two reads of the backlog. Default
	// 15 s, at most MaxWatchInterval.
	Interval time.Duration
	// WarnEvery is how often the warning is repeated: a process that does
	// not dispatch logs a WARN at the first read that finds Runs pending,
	// and again at the first read WarnEvery or more after the last, while
	// they are. Default 5 min, at most MaxWatchInterval.
	WarnEvery time.Duration
	// Remedy ends the warning: what to set to turn dispatch on (the
	// binary knows its settings' names; this package does not).
	Remedy string
	// Logger receives the warnings; nil discards them.
	Logger *slog.Logger
	// Observer receives every read and, once, whether this process
	// dispatches; nil drops them.
	Observer BacklogObserver
}

// Backlog is what a [Watcher] read last.
type Backlog struct {
	Stats
	Dispatching bool
	Read        bool // false until the first read succeeds
}

// Stranded reports whether Runs are pending while this process does not
// dispatch: unless another replica has a runtime, they stay queued.
func (b Backlog) Stranded() bool { return !b.Dispatching && b.Pending > 0 }

// Watcher reads the outbox's backlog at an interval for the metrics, the
// log and the console, whether or not this process dispatches. It is safe
// for concurrent use.
type Watcher struct {
	store *Store
	cfg   WatchConfig
	log   *slog.Logger

	mu       sync.Mutex
	last     Backlog
	warnedAt time.Time // when the warning was last logged; zero: not since Runs were last pending
}

// NewWatcher returns a watcher of store's backlog, or an error naming the
// field of cfg out of its range.
func NewWatcher(store *Store, cfg WatchConfig) (*Watcher, error) {
	switch {
	case store == nil:
		return nil, errors.New("dispatch: a Watcher needs a Store")
	case cfg.Interval < 0 || cfg.Interval > MaxWatchInterval:
		return nil, fmt.Errorf("dispatch: WatchConfig.Interval is %s; it must be more than 0s and at most %s", cfg.Interval, MaxWatchInterval)
	case cfg.WarnEvery < 0 || cfg.WarnEvery > MaxWatchInterval:
		return nil, fmt.Errorf("dispatch: WatchConfig.WarnEvery is %s; it must be more than 0s and at most %s", cfg.WarnEvery, MaxWatchInterval)
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultWatchInterval)
	cfg.WarnEvery = cmp.Or(cfg.WarnEvery, DefaultWarnEvery)
	w := &Watcher{store: store, cfg: cfg, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)), last: Backlog{Dispatching: cfg.Dispatching}}
	if cfg.Observer != nil {
		cfg.Observer.ObserveDispatching(cfg.Dispatching)
	}
	return w, nil
}

// Backlog returns what the watcher read last, without reading.
func (w *Watcher) Backlog() Backlog {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Run reads the backlog at once, then every Interval until ctx ends, and
// returns nil. A failed read is logged at DEBUG (the dispatcher and the
// requests say so louder) and keeps the last backlog.
func (w *Watcher) Run(ctx context.Context) error {
	loop.Loop{}.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		w.read(ctx)
		return loop.Next{Wait: w.cfg.Interval}, nil
	})
	return nil
}

// read reads the backlog once, reports it, and warns when it is stranded
// and the last warning is WarnEvery old.
func (w *Watcher) read(ctx context.Context) {
	st, err := w.store.Stats(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.LogAttrs(ctx, slog.LevelDebug, "dispatch: reading the backlog failed", slog.String("error", err.Error()))
		}
		return
	}
	if w.cfg.Observer != nil {
		w.cfg.Observer.ObserveDispatchBacklog(st.Pending, st.Failed, st.OldestPending)
	}
	now := time.Now()
	w.mu.Lock()
	w.last = Backlog{Stats: st, Dispatching: w.cfg.Dispatching, Read: true}
	warn := w.last.Stranded() && (w.warnedAt.IsZero() || now.Sub(w.warnedAt) >= w.cfg.WarnEvery)
	switch {
	case warn:
		w.warnedAt = now
	case !w.last.Stranded():
		w.warnedAt = time.Time{}
	}
	w.mu.Unlock()
	if warn {
		w.log.LogAttrs(ctx, slog.LevelWarn, "dispatch is off on this replica and Runs are waiting for it: they stay queued "+
			"until a replica with a runtime delivers them; "+w.cfg.Remedy,
			slog.Int64("pending", st.Pending), slog.Duration("oldest", st.OldestPending.Round(time.Second)),
			slog.Duration("repeats_every", w.cfg.WarnEvery))
	}
}
