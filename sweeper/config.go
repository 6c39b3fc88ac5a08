package sweeper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/internal/loop"
)

// Defaults of [Config].
const (
	// DefaultMaxBound is the default ceiling on Bound.
	DefaultMaxBound = 1000
	// DefaultBound is the default number of rows one pass reads, when
	// MaxBound allows it.
	DefaultBound = 1000
	// DefaultBudget is the default time after which a run stops making
	// passes (past its first round). It bounds how long a run goes
	// unreported, not retention: [Sweeper.Run] starts the next run at once
	// while one leaves a backlog.
	DefaultBudget = 15 * time.Minute
	// DefaultInterval is the time between two runs of [Sweeper.Run]: an
	// hour, 24 times finer than the shortest retention it enforces.
	DefaultInterval = time.Hour
	// DefaultDuty is the default share of a run's time spent in passes: a
	// quarter, so a run rests three times as long as each pass took.
	DefaultDuty = 0.25
)

// ErrInvalidConfig is wrapped by every error [Config.Validate] returns.
var ErrInvalidConfig = errors.New("sweeper: invalid config")

// Config configures a [Sweeper]. The zero value is the production
// configuration.
type Config struct {
	// Bound is the most rows one pass reads, and so deletes, from one
	// table. Default DefaultBound, or MaxBound when that is lower. A Bound
	// above MaxBound is refused, never clamped.
	Bound int
	// MaxBound is the ceiling on Bound, a guard against a Bound set by
	// mistake. Default DefaultMaxBound (1000).
	MaxBound int
	// Budget is the time after which a run makes no further pass, once it
	// has made its first round (one pass on every table): the tables whose
	// last pass read a full bound are left with a backlog for the next
	// run. A run ends sooner when every table is drained (a pass read less
	// than Bound). Default DefaultBudget (15 min); it must be positive.
	Budget time.Duration
	// Duty is the most of a run's time spent in passes, from above 0 to 1:
	// after a pass that took d and read a full bound, the run rests
	// d×(1/Duty−1) before its next pass, so passes cannot take a core of
	// the database from the claim path, and back off by themselves when a
	// loaded database makes them slow. 1 runs passes back to back.
	// Default DefaultDuty (0.25).
	Duty float64
	// Interval is the time between two runs of [Sweeper.Run]. Default
	// DefaultInterval (1 h).
	Interval time.Duration
	// Jitter is the most random delay added to each wait of [Sweeper.Run],
	// so replicas do not sweep in lock-step; it is also the most the first
	// run waits after start. Default Interval/10; negative disables it. At
	// most Interval.
	Jitter time.Duration
	// Logger receives the run summaries and the backlog warnings. Default
	// slog.Default().
	Logger *slog.Logger
	// Observer is told about every pass, for metrics. Default none.
	Observer Observer
	// Recorder is told about every run when it ends, such as a [RunLog]
	// keeping them for the console. Default none.
	Recorder Recorder
	// Clock is the database clock retention is judged by. Nil (the
	// default) passes NULL into the SQL, so every replica judges retention
	// by the database's now(); tests hand in the stub the plane and the
	// stores they seed with run at.
	Clock *dbclock.Clock

	// beforeDelete, set by tests alone, runs inside a pass between its read
	// and its delete, while the pass holds the locks of its batch; an error
	// it returns fails the pass.
	beforeDelete func(ctx context.Context, table string, ids []uuid.UUID) error
	// rest waits between two passes and reports false when the run should
	// stop: [loop.Sleep], or a test's stub.
	rest func(ctx context.Context, d time.Duration) bool
	// wait, set by tests alone, replaces the timer of [Sweeper.Run]'s wait
	// before each run; it reports false when Run should return.
	wait func(ctx context.Context, d time.Duration) bool
	// now, set by tests alone, replaces time.Now as the clock the budget
	// is judged by.
	now func() time.Time
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.MaxBound = cmp.Or(c.MaxBound, DefaultMaxBound)
	c.Bound = cmp.Or(c.Bound, min(DefaultBound, c.MaxBound))
	c.Budget = cmp.Or(c.Budget, DefaultBudget)
	c.Duty = cmp.Or(c.Duty, DefaultDuty)
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.Jitter = cmp.Or(c.Jitter, c.Interval/10)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Observer == nil {
		c.Observer = ObserverFunc(func(string, int, int, time.Duration) {})
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.rest == nil {
		c.rest = loop.Sleep
	}
	return c
}

// Validate returns an error wrapping [ErrInvalidConfig] that names the
// first field of c, with its defaults, out of range: "sweeper: Config.F is
// V; it must be R". A Bound above MaxBound is refused, never clamped, with
// both numbers in the message.
func (c Config) Validate() error {
	c = c.WithDefaults()
	invalid := func(format string, args ...any) error {
		return invalidConfig(fmt.Sprintf("sweeper: "+format, args...))
	}
	switch {
	case c.MaxBound < 1:
		return invalid("Config.MaxBound is %d; it must be at least 1", c.MaxBound)
	case c.Bound < 1:
		return invalid("Config.Bound is %d; it must be from 1 to MaxBound, %d", c.Bound, c.MaxBound)
	case c.Bound > c.MaxBound:
		return invalid("Bound %d exceeds MaxBound %d: a larger bound is refused, not clamped; "+
			"lower Bound, or raise MaxBound with it", c.Bound, c.MaxBound)
	case c.Budget < 0:
		return invalid("Config.Budget is %s; it must be at least 0s", c.Budget)
	case !(c.Duty > 0 && c.Duty <= 1):
		return invalid("Config.Duty is %g; it must be above 0 and at most 1", c.Duty)
	case c.Interval < 0:
		return invalid("Config.Interval is %s; it must be at least 0s", c.Interval)
	case c.Jitter > c.Interval:
		return invalid("Config.Jitter is %s; it must be at most Interval, %s", c.Jitter, c.Interval)
	}
	return nil
}

// invalidConfig is an error of [Config.Validate]: it is [ErrInvalidConfig].
type invalidConfig string

func (e invalidConfig) Error() string        { return string(e) }
func (e invalidConfig) Is(target error) bool { return target == ErrInvalidConfig }

// Observer is told about every pass the sweeper makes and commits, for
// metrics; table is one of the Table* constants. Calls come from the
// goroutine running the sweep; an implementation must not block.
type Observer interface {
	ObservePass(table string, read, deleted int, d time.Duration)
}

// BacklogObserver is an [Observer] that is also told of every committed pass
// whose read filled the bound, such as a counter of backlog passes per table.
// The sweeper calls ObserveBacklogPass, after ObservePass, when its Observer
// implements it.
type BacklogObserver interface {
	Observer
	ObserveBacklogPass(table string)
}

// ObserverFunc adapts a function to an [Observer].
type ObserverFunc func(table string, read, deleted int, d time.Duration)

// ObservePass calls f.
func (f ObserverFunc) ObservePass(table string, read, deleted int, d time.Duration) {
	f(table, read, deleted, d)
}
