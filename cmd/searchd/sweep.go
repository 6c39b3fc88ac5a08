package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/searchd/searchd/sweeper"
)

// Environment variables of the sweeper's settings.
const (
	envSweepInterval = "SEARCHD_SWEEP_INTERVAL"
	envSweepJitter   = "SEARCHD_SWEEP_JITTER"
	envSweepBound    = "SEARCHD_SWEEP_BOUND"
	envSweepMaxBound = "SEARCHD_SWEEP_MAX_BOUND"
	envSweepBudget   = "SEARCHD_SWEEP_BUDGET"
	envSweepDuty     = "SEARCHD_SWEEP_DUTY"
)

var sweepCommand = command{"searchd sweep [flags]",
	"Run the sweeper once, for an outside scheduler (cron, a Kubernetes CronJob): delete the claims, Runs, " +
		"snapshots and dropped deliveries past their retention in bounded passes until none is left or the sweep budget " +
		"runs out, print what each table read and deleted, and exit 0, or 1 on an error. A backlog left for the next run " +
		"is warned of, not an error. A sweep never blocks a claim, and any number may run at once, with serve's own " +
		"sweepers too.",
	cmdSweep}

// parseSweepJitter reads the sweeper's jitter, 10% of the interval (read
// before it) by default. A jitter of 0s is given to the sweeper as
// negative, which is how it is told to add none: zero would be its
// default.
func parseSweepJitter(r *reader, s setting) string {
	c := &r.cfg.Sweep
	problem := setValue(&c.Jitter, s, c.Interval/10, time.ParseDuration, "a duration (write it like 6m, or 0s for none)", func(d time.Duration) string {
		if d < 0 || (c.Interval > 0 && d > c.Interval) {
			return fmt.Sprintf("%s is out of range: from 0s to the sweep interval (%s)", shortDuration(d), shortDuration(c.Interval))
		}
		return ""
	})
	if problem == "" && s.value != "" && c.Jitter == 0 {
		c.Jitter = -1
	}
	return problem
}

// checkSweepBound checks the sweep bound against its ceiling, with
// [sweeper.Config.Validate]'s message, which names both numbers: a bound
// over its ceiling is refused, never clamped. The settings are each in
// range when it runs; otherwise their own messages say enough.
func checkSweepBound(r *reader) {
	if !r.ok(envSweepInterval, envSweepJitter, envSweepBound, envSweepMaxBound, envSweepBudget, envSweepDuty) {
		return
	}
	if err := r.cfg.Sweep.Validate(); err != nil {
		msg := strings.TrimPrefix(err.Error(), "sweeper: ")
		bound := r.given[envSweepBound]
		r.bad(bound, "%s (Bound is %s, MaxBound is %s)", msg, bound.name, r.name(envSweepMaxBound))
	}
}

// sweeper returns the run of serve's and dev's sweeper, on the stores'
// pool, at their database clock and recording into their run log: nil
// when the sweep interval is zero. It sweeps until its context ends, the
// signal: the sweeper has no request to drain, and a run cut short rolls
// its pass back.
func (s server) sweeper() (func(context.Context), error) {
	if s.cfg.Sweep.Interval <= 0 {
		s.logger.Info("sweeper off: the sweep interval is 0s; run searchd sweep from an outside scheduler to enforce retention")
		return nil, nil
	}
	scfg := s.cfg.Sweep
	scfg.Logger, scfg.Recorder, scfg.Clock, scfg.Observer = s.logger, s.st.sweeperRuns, s.st.clock, s.obs.metrics
	sw, err := sweeper.New(s.st.pool, scfg)
	if err != nil {
		return nil, err
	}
	c := sw.Config()
	s.logger.Info("sweeper scheduled",
		slog.Duration("interval", c.Interval), slog.Duration("jitter", max(c.Jitter, 0)),
		slog.Int("bound", c.Bound), slog.Int("max_bound", c.MaxBound), slog.Duration("budget", c.Budget),
		slog.Float64("duty", c.Duty))
	return sw.Run, nil
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
	cfg, err := a.loadCommand("sweep", sweepCommand, args)
	if err != nil {
		return err
	}
	dbURL, scfg := cfg.DatabaseURL, cfg.Sweep
	logger := newLogger(a.stderr, cfg)
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
	warnRemovedSettings(logger, a.getenv, cfg.renamed)
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
		attrs = append(attrs, slog.Group(t.name,
			slog.String("table", t.tr.Table), slog.Int("read", t.tr.Read), slog.Int("deleted", t.tr.Deleted),
			slog.Int("passes", t.tr.Passes), slog.Duration("duration", t.tr.Duration), slog.Bool("backlog", t.tr.Backlog)))
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
	fmt.Fprintf(w, "swept in %s: read %d, deleted %d (bound %d, budget %s)\n",
		roundDuration(rep.Duration), read, deleted, cfg.Bound, shortDuration(cfg.Budget))
	if len(backlog) > 0 {
		fmt.Fprintf(w, "backlog: the budget ran out and the last pass on %s read a full bound; rows past retention remain "+
			"for the next run (run searchd sweep again or more often, or raise --sweep-budget)\n", strings.Join(backlog, ", "))
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
