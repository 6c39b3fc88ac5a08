package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/searchd/searchd/internal/telemetry"
	"github.com/searchd/searchd/sweeper"
)

// Environment variables of the sweeper's settings.
const (
	// EnvSweepInterval is the time between two runs of serve's sweeper;
	// 0s runs none.
	EnvSweepInterval = "SEARCHD_SWEEP_INTERVAL"
	// EnvSweepJitter is the most random delay added to each wait.
	EnvSweepJitter = "SEARCHD_SWEEP_JITTER"
	// EnvSweepBound is the most rows one pass reads from one table.
	EnvSweepBound = "SEARCHD_SWEEP_BOUND"
	// EnvSweepMaxBound is the ceiling on the bound.
	EnvSweepMaxBound = "SEARCHD_SWEEP_MAX_BOUND"
	// EnvSweepMaxPasses is the most passes a run makes on one table.
	EnvSweepMaxPasses = "SEARCHD_SWEEP_MAX_PASSES"
	// EnvSweepDuty is the most of a run's time spent in passes.
	EnvSweepDuty = "SEARCHD_SWEEP_DUTY"
)

// The sweeper's settings. The schedule is serve's and dev's alone: `searchd
// sweep` is one run, scheduled from outside.
var (
	optSweepInterval = option{"sweep-interval", EnvSweepInterval, shortDuration(sweeper.DefaultInterval),
		"time between two runs of the in-process sweeper, which deletes the claims, Runs, snapshots and dropped deliveries past their " +
			"retention in bounded passes; the first run is within the jitter of start. 0s runs no sweeper: then run " +
			"searchd sweep from an outside scheduler (cron, a Kubernetes CronJob)"}
	optSweepJitter = option{"sweep-jitter", EnvSweepJitter,
		fmt.Sprintf("10%% of the interval (%s at %s)", shortDuration(sweeper.DefaultInterval/10), shortDuration(sweeper.DefaultInterval)),
		"most random delay added to each wait of the sweeper, so replicas started together do not sweep in " +
			"lock-step; 0s (none) to the interval"}
	optSweepBound = option{"sweep-bound", EnvSweepBound,
		fmt.Sprintf("%d, or the ceiling when that is lower", sweeper.DefaultBound),
		"most rows one sweeper pass reads, and so deletes, from one table: from 1 to the ceiling (--sweep-max-bound). " +
			"A bound over the ceiling is refused at start-up, never clamped"}
	optSweepMaxBound = option{"sweep-max-bound", EnvSweepMaxBound, strconv.Itoa(sweeper.DefaultMaxBound),
		"ceiling on the sweep bound, standing in for PostgREST's db-max-rows: raise it with db-max-rows, never alone"}
	optSweepMaxPasses = option{"sweep-max-passes", EnvSweepMaxPasses, strconv.Itoa(sweeper.DefaultMaxPasses),
		"most passes one run makes on one table, at least 1; a run whose last pass read a full bound leaves a " +
			"backlog for the next run and logs a warning"}
	optSweepDuty = option{"sweep-duty", EnvSweepDuty, strconv.FormatFloat(sweeper.DefaultDuty, 'g', -1, 64),
		"most of a run's time spent in passes, above 0 to 1: after each pass that leaves a backlog the run rests " +
			"in proportion (0.25 rests three times the pass), so a long sweep leaves the database to the claim path; " +
			"1 runs passes back to back"}
)

// sweepBoundOptions are the settings of one run of the sweeper.
func sweepBoundOptions() []option {
	return []option{optSweepBound, optSweepMaxBound, optSweepMaxPasses, optSweepDuty}
}

var sweepCommand = command{"searchd sweep [flags]",
	"Run the sweeper once, for an outside scheduler (cron, a Kubernetes CronJob): delete the claims, Runs, " +
		"snapshots and dropped deliveries past their retention in bounded passes, print what each table read and deleted, and exit 0, " +
		"or 1 on an error. A backlog left for the next run is warned of, not an error. A sweep never blocks a " +
		"claim, and any number may run at once, with serve's own sweepers too.",
	append(append([]option{optDatabaseURL}, sweepBoundOptions()...), optLogLevel, optLogFormat)}

// readSweepSettings reads the sweeper's settings from the flags on fs and
// the environment, the schedule too when schedule is set, and returns them
// with what is wrong with them, one message per setting. Bound, MaxBound,
// MaxPasses and Duty are left zero, the sweeper's defaults, when unset; with
// schedule, Interval and Jitter are always set: Interval zero means no
// sweeper (not the sweeper's default hour), and a Jitter of 0s is given to
// the sweeper as negative, which is how it is told to add none.
//
// A bound over its ceiling is refused with [sweeper.Config.Validate]'s
// message, which names both numbers; it is never clamped.
func readSweepSettings(fs *flag.FlagSet, getenv func(string) string, schedule bool) (sweeper.Config, []string) {
	var cfg sweeper.Config
	var problems []string
	bad := func(s setting, format string, args ...any) {
		problems = append(problems, s.name+": "+fmt.Sprintf(format, args...))
	}
	count := func(fl, env string) (setting, int) {
		s := lookup(fs, fl, env, getenv)
		if s.value == "" {
			return s, 0
		}
		n, err := strconv.Atoi(s.value)
		switch {
		case err != nil:
			bad(s, "%q is not a whole number", s.value)
		case n < 1:
			bad(s, "%d is out of range: at least 1", n)
		default:
			return s, n
		}
		return s, 0
	}
	if schedule {
		interval := lookup(fs, "sweep-interval", EnvSweepInterval, getenv)
		cfg.Interval = sweeper.DefaultInterval
		if interval.value != "" {
			d, err := time.ParseDuration(interval.value)
			switch {
			case err != nil:
				bad(interval, "%q is not a duration (write it like 1h or 30m, or 0s to run no sweeper)", interval.value)
			case d < 0:
				bad(interval, "%s is out of range: 0s (no sweeper) or more", shortDuration(d))
			default:
				cfg.Interval = d
			}
		}
		jitter := lookup(fs, "sweep-jitter", EnvSweepJitter, getenv)
		cfg.Jitter = cfg.Interval / 10
		if jitter.value != "" {
			d, err := time.ParseDuration(jitter.value)
			switch {
			case err != nil:
				bad(jitter, "%q is not a duration (write it like 6m, or 0s for none)", jitter.value)
			case d < 0 || (cfg.Interval > 0 && d > cfg.Interval):
				bad(jitter, "%s is out of range: from 0s to the sweep interval (%s)", shortDuration(d), shortDuration(cfg.Interval))
			case d == 0:
				cfg.Jitter = -1 // the sweeper's "none": zero would be its default
			default:
				cfg.Jitter = d
			}
		}
	}

	var bound, maxBound setting
	bound, cfg.Bound = count("sweep-bound", EnvSweepBound)
	maxBound, cfg.MaxBound = count("sweep-max-bound", EnvSweepMaxBound)
	_, cfg.MaxPasses = count("sweep-max-passes", EnvSweepMaxPasses)
	if duty := lookup(fs, "sweep-duty", EnvSweepDuty, getenv); duty.value != "" {
		f, err := strconv.ParseFloat(duty.value, 64)
		switch {
		case err != nil:
			bad(duty, "%q is not a number (write it like 0.25)", duty.value)
		case !(f > 0 && f <= 1):
			bad(duty, "%s is out of range: above 0 and at most 1", duty.value)
		default:
			cfg.Duty = f
		}
	}

	// The settings are each in range; what is left for Validate is the
	// bound against its ceiling.
	if len(problems) == 0 {
		if err := cfg.Validate(); err != nil {
			msg := strings.TrimPrefix(err.Error(), sweeper.ErrInvalidConfig.Error()+": ")
			problems = append(problems, fmt.Sprintf("%s: %s (Bound is %s, MaxBound is %s)", bound.name, msg, bound.name, maxBound.name))
		}
	}
	return cfg, problems
}

// startSweeper starts the sweeper of serve and dev on st's pool, at st's
// database clock and recording into st's run log, reporting to logger and
// metrics (when not nil), and returns the function that stops
// it and waits for it to return. It sweeps until ctx ends, the signal:
// the sweeper has no request to drain, and a run cut short rolls its pass
// back. The caller stops it before the pool closes. With cfg.Sweep.Interval
// zero there is no sweeper.
func startSweeper(ctx context.Context, st *stores, cfg serverConfig, logger *slog.Logger, metrics *telemetry.Metrics) (func(), error) {
	if cfg.Sweep.Interval <= 0 {
		logger.Info("sweeper off: the sweep interval is 0s; run searchd sweep from an outside scheduler to enforce retention")
		return func() {}, nil
	}
	scfg := cfg.Sweep
	scfg.Logger = logger
	scfg.Recorder = st.sweeperRuns
	scfg.Clock = st.clock
	if metrics != nil { // a nil *Metrics in the interface would not be nil
		scfg.Observer = metrics
	}
	s, err := sweeper.New(st.pool, scfg)
	if err != nil {
		return nil, err
	}
	c := s.Config()
	logger.Info("sweeper scheduled",
		slog.Duration("interval", c.Interval), slog.Duration("jitter", max(c.Jitter, 0)),
		slog.Int("bound", c.Bound), slog.Int("max_bound", c.MaxBound), slog.Int("max_passes", c.MaxPasses),
		slog.Float64("duty", c.Duty))
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(sctx)
	}()
	return func() {
		cancel()
		<-done
	}, nil
}

// recordFailed logs a sweeper run that could not be recorded in
// agent.sweeper_runs; the run itself stands.
func recordFailed(logger *slog.Logger) func(error) {
	return func(err error) {
		logger.Warn("sweeper: the run is not recorded for the console", slog.String("error", err.Error()))
	}
}

// sweep runs `searchd sweep`: one run of the sweeper.
func (a *app) sweep(ctx context.Context, args []string) error {
	fs := a.flagSet("sweep")
	registerOptions(fs, sweepCommand)
	if err := parse(fs, args); err != nil {
		return err
	}
	var problems []string
	dbURL, problem := readDatabaseURL(fs, a.getenv)
	if problem != "" {
		problems = append(problems, problem)
	}
	scfg, sweepProblems := readSweepSettings(fs, a.getenv, false)
	problems = append(problems, sweepProblems...)
	level, format, logProblems := readLogSettings(fs, a.getenv, false)
	problems = append(problems, logProblems...)
	if len(problems) > 0 {
		return invalid(problems)
	}
	logger := newLogger(a.stderr, serverConfig{LogLevel: level, LogFormat: format})
	// A scheduler stopping the job (a CronJob's deadline) ends the run: the
	// pass in progress rolls back, and the report so far is printed.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err := checkSchema(ctx, dbURL); err != nil {
		return err
	}
	// One connection: a run is one pass, one transaction, at a time.
	pool, err := openSmallPool(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	scfg.Logger = logger
	scfg.Recorder = sweeper.NewRunLog(pool, sweeper.ViaSweep, a.dbClock, recordFailed(logger))
	scfg.Clock = a.dbClock
	s, err := sweeper.New(pool, scfg)
	if err != nil {
		return err
	}
	rep, err := s.RunOnce(ctx)
	logSweepReport(ctx, logger, rep, err)
	printSweepReport(a.stdout, rep, s.Config(), err)
	return err
}

// logSweepReport logs one line for the run of `searchd sweep`: per table,
// the rows read and deleted, the passes, the time and the backlog. The
// sweeper has logged each table already; this line is the run's outcome.
func logSweepReport(ctx context.Context, logger *slog.Logger, rep sweeper.Report, err error) {
	attrs := make([]slog.Attr, 0, 8)
	for _, t := range []struct {
		name string
		tr   sweeper.TableReport
	}{{"claims", rep.Claims}, {"occurrences", rep.Occurrences}, {"runs", rep.Runs}, {"snapshots", rep.Snapshots},
		{"drops", rep.Drops}, {"resolutions", rep.Resolutions}, {"inbox", rep.Inbox}, {"sessions", rep.Sessions}} {
		tr := t.tr
		attrs = append(attrs, slog.Group(t.name,
			slog.String("table", tr.Table), slog.Int("read", tr.Read), slog.Int("deleted", tr.Deleted),
			slog.Int("passes", tr.Passes), slog.Duration("duration", tr.Duration), slog.Bool("backlog", tr.Backlog)))
	}
	attrs = append(attrs, slog.Duration("duration", rep.Duration))
	ctx = context.WithoutCancel(ctx) // a run a signal stopped is still reported
	switch {
	case err != nil:
		logger.LogAttrs(ctx, slog.LevelError, "sweep failed", append(attrs, slog.String("error", err.Error()))...)
	case rep.Backlog():
		logger.LogAttrs(ctx, slog.LevelWarn, "sweep done; a backlog remains for the next run", attrs...)
	default:
		logger.LogAttrs(ctx, slog.LevelInfo, "sweep done", attrs...)
	}
}

// printSweepReport writes the report of `searchd sweep` for a person: a
// row per table swept, then the outcome.
func printSweepReport(w io.Writer, rep sweeper.Report, cfg sweeper.Config, err error) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "table\tread\tdeleted\tpasses\tduration\tbacklog")
	var read, deleted int
	var backlog []string
	for _, tr := range rep.Tables() {
		if tr.Table == "" {
			continue // not reached: the run stopped before it
		}
		b := "no"
		if tr.Backlog {
			b = "yes"
			backlog = append(backlog, tr.Table)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", tr.Table, tr.Read, tr.Deleted, tr.Passes, roundDuration(tr.Duration), b)
		read += tr.Read
		deleted += tr.Deleted
	}
	_ = tw.Flush()
	if err != nil {
		fmt.Fprintf(w, "stopped by an error after %s: read %d, deleted %d; what a failed pass read was not deleted\n",
			roundDuration(rep.Duration), read, deleted)
		return
	}
	fmt.Fprintf(w, "swept in %s: read %d, deleted %d (bound %d, max passes %d)\n",
		roundDuration(rep.Duration), read, deleted, cfg.Bound, cfg.MaxPasses)
	if len(backlog) > 0 {
		fmt.Fprintf(w, "backlog: the last pass on %s read a full bound; rows past retention remain for the next run "+
			"(run searchd sweep more often, or raise --sweep-max-passes)\n", strings.Join(backlog, ", "))
	}
}

// roundDuration rounds d for a person: to 0.1 ms under a second, else to
// the millisecond.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// shortDuration writes d as time.Duration does, less its trailing zero
// units: 1h, 6m, 1h30m, 1m0.5s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
