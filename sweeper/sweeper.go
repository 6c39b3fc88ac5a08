package sweeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/loop"
	"github.com/searchd/searchd/internal/shardpass"
	"github.com/searchd/searchd/providerjobs"
)

// The tables the sweeper deletes from, as [TableReport.Table] and
// [Observer] name them.
const (
	TableClaims      = "agent.idempotency_keys"
	TableRuns        = "agent.runs"
	TableSnapshots   = "agent.saved_search_snapshots"
	TableDrops       = "agent.webhook_drops"
	TableResolutions = "agent.tool_call_resolutions"
	TableInbox       = "agent.provider_inbox"
	TableOccurrences = "agent.schedule_occurrences"
	TableSessions    = "agent.console_sessions"
	TableDirectory   = "agent.provider_job_directory"
)

// SnapshotMinAge is how old a snapshot must be before it may be deleted:
// the start claim's retention, plus an hour for a start that read the
// claim just before it expired and is admitting its Run right now.
const SnapshotMinAge = idempotency.SavedSearchStartRetention + time.Hour

// DB is what the sweeper needs of a database handle, usually a
// *pgxpool.Pool.
type DB interface {
	shardpass.DB
	Begin(ctx context.Context) (pgx.Tx, error)
}

// TableReport is what one run did to one table.
type TableReport struct {
	Table string // one of the Table* constants
	// Read counts the rows the passes selected as past retention;
	// Deleted, those of them still past it at the delete.
	Read    int
	Deleted int
	Passes  int
	// Duration is the time spent on the table: its passes and the rests
	// after them.
	Duration time.Duration
	// Backlog reports whether the last pass read a full bound, leaving
	// rows past retention for the next run.
	Backlog bool
	// FullPasses counts the passes whose read filled the bound, even when
	// later passes drained the table.
	FullPasses int
}

// Report is what one run did.
type Report struct {
	Claims      TableReport
	Runs        TableReport
	Directory   TableReport
	Snapshots   TableReport
	Drops       TableReport
	Resolutions TableReport
	Inbox       TableReport
	Occurrences TableReport
	Sessions    TableReport
	Duration    time.Duration

	// rest is the rest the last pass asked for when the run ended on its
	// budget: what [Sweeper.Run] waits before the next run.
	rest time.Duration
}

// Tables returns the table reports in the order the run swept them.
func (r Report) Tables() []TableReport {
	return []TableReport{r.Claims, r.Occurrences, r.Runs, r.Directory, r.Snapshots, r.Drops, r.Resolutions, r.Inbox, r.Sessions}
}

// Backlog reports whether any table was left with a backlog.
func (r Report) Backlog() bool {
	return slices.ContainsFunc(r.Tables(), func(t TableReport) bool { return t.Backlog })
}

// target is one table's pass and its statements, with the named arguments
// of its own beyond @now, @all, @keys, @limit, @ctids and @ids.
type target struct {
	table  string
	pass   *shardpass.Pass
	sql    statements
	extra  pgx.NamedArgs
	report func(*Report) *TableReport
}

func newTarget(table string, sql statements, extra pgx.NamedArgs, report func(*Report) *TableReport) target {
	return target{table: table, pass: shardpass.New(table, sql.due), sql: sql, extra: extra, report: report}
}

var targets = []target{
	newTarget(TableClaims, claimExpired, nil, func(r *Report) *TableReport { return &r.Claims }),
	// Before the Runs: an occurrence has its Run's retain_until, so both
	// go in the same run.
	newTarget(TableOccurrences, occurrenceExpired, nil, func(r *Report) *TableReport { return &r.Occurrences }),
	newTarget(TableRuns, runExpired, nil, func(r *Report) *TableReport { return &r.Runs }),
	newTarget(TableDirectory, directoryExpired, nil, func(r *Report) *TableReport { return &r.Directory }),
	// After the Runs, so the snapshots of Runs a round deletes go in the
	// same round.
	newTarget(TableSnapshots, snapshotOrphan,
		pgx.NamedArgs{"min_age_us": SnapshotMinAge.Microseconds(), "scope": idempotency.ScopeSavedSearchStart},
		func(r *Report) *TableReport { return &r.Snapshots }),
	newTarget(TableDrops, dropExpired,
		pgx.NamedArgs{"retention_us": providerjobs.DropRetention.Microseconds()},
		func(r *Report) *TableReport { return &r.Drops }),
	newTarget(TableResolutions, resolutionExpired, nil, func(r *Report) *TableReport { return &r.Resolutions }),
	// Kept as long as the drop audit, which may name its deliveries.
	newTarget(TableInbox, inboxExpired,
		pgx.NamedArgs{"retention_us": providerjobs.DropRetention.Microseconds()},
		func(r *Report) *TableReport { return &r.Inbox }),
	newTarget(TableSessions, sessionExpired, nil, func(r *Report) *TableReport { return &r.Sessions }),
}

// Sweeper deletes rows past their retention in bounded passes. It is safe
// for concurrent use, and any number of sweepers may run on one database
// at once.
type Sweeper struct {
	db  DB
	cfg Config
}

// New returns a sweeper on db, or the error of [Config.Validate].
func New(db DB, cfg Config) (*Sweeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	return &Sweeper{db: db, cfg: cfg}, nil
}

// Config returns the sweeper's configuration, with its defaults applied.
func (s *Sweeper) Config() Config { return s.cfg }

// RunOnce drains what is due: it sweeps the tables round-robin, one pass
// per table per round, until each pass reads less than Bound, resting
// after full passes as Duty asks. The first round is always made in full;
// after it the run stops once Budget has passed, leaving the tables still
// full with a backlog (logged as a warning).
//
// It returns the report, complete or partial, and the failures of the
// tables that failed, joined; a failed table does not stop the others.
// When ctx ends it returns ctx's error with the report so far.
func (s *Sweeper) RunOnce(ctx context.Context) (Report, error) { return s.run(ctx, nil) }

// run is [Sweeper.RunOnce] on the tables only names, or on every table when
// only is nil; the others are reported with no pass.
func (s *Sweeper) run(ctx context.Context, only map[string]bool) (Report, error) {
	var (
		rep    Report
		errs   []error
		start  = time.Now()
		budget = s.cfg.now().Add(s.cfg.Budget)
		tables = make([]*tableRun, len(targets))
		// owed is the rest the last pass asked for, before the run's
		// next pass; owner is the table that made that pass.
		owed  time.Duration
		owner *tableRun
	)
	for i, t := range targets {
		tables[i] = &tableRun{target: t, report: TableReport{Table: t.table}, done: only != nil && !only[t.table]}
	}
	// Round-robin, so one table's backlog cannot hold the others off for
	// the whole budget.
run:
	for round := 0; ; round++ {
		swept := false
		for _, tb := range tables {
			if tb.done {
				continue
			}
			if ctx.Err() != nil || (round > 0 && !s.cfg.now().Before(budget)) {
				break run
			}
			if owed > 0 {
				if !s.cfg.rest(ctx, owed) {
					break run
				}
				owner.report.Duration += owed
				owed = 0
			}
			swept = true
			d, err := s.sweepPass(ctx, tb)
			switch {
			case err != nil:
				errs = append(errs, err)
				tb.done = true
			case tb.report.Backlog:
				owed, owner = s.restAfter(d), tb
			default:
				tb.done = true
			}
		}
		if !swept {
			break
		}
	}
	for _, tb := range tables {
		*tb.target.report(&rep) = tb.report
		s.logTable(ctx, tb.report)
	}
	rep.Duration = time.Since(start)
	rep.rest = owed
	err := errors.Join(errs...)
	if ctx.Err() != nil {
		err = fmt.Errorf("sweeper: run stopped: %w", ctx.Err())
	}
	if s.cfg.Recorder != nil {
		s.cfg.Recorder.RecordRun(context.WithoutCancel(ctx), RunRecord{Report: rep, Err: err, Bound: s.cfg.Bound})
	}
	return rep, err
}

// tableRun is one table's part of a run.
type tableRun struct {
	target target
	report TableReport
	done   bool // a pass read less than the bound, or failed
}

// sweepPass makes one pass on tb and counts it. It returns the pass's
// duration, or an error naming the table and the pass.
func (s *Sweeper) sweepPass(ctx context.Context, tb *tableRun) (time.Duration, error) {
	tr, t := &tb.report, tb.target
	start := time.Now()
	read, deleted, err := s.pass(ctx, t)
	d := time.Since(start)
	if err != nil {
		tr.Duration += d
		return d, fmt.Errorf("sweeper: %s pass %d: %w", t.table, tr.Passes+1, err)
	}
	tr.Passes++
	tr.Read += read
	tr.Deleted += deleted
	tr.Duration += d
	tr.Backlog = read >= s.cfg.Bound
	s.cfg.Observer.ObservePass(t.table, read, deleted, d)
	if tr.Backlog {
		tr.FullPasses++
		if bo, ok := s.cfg.Observer.(BacklogObserver); ok {
			bo.ObserveBacklogPass(t.table)
		}
	}
	s.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "sweeper: pass",
		slog.String("table", t.table), slog.Int("pass", tr.Passes), slog.Int("read", read),
		slog.Int("deleted", deleted), slog.Bool("full", tr.Backlog), slog.Duration("duration", d))
	return d, nil
}

func (s *Sweeper) logTable(ctx context.Context, tr TableReport) {
	if tr.Passes == 0 && !tr.Backlog {
		return // not reached: the run was stopped before it
	}
	attrs := []slog.Attr{
		slog.String("table", tr.Table), slog.Int("read", tr.Read), slog.Int("deleted", tr.Deleted),
		slog.Int("passes", tr.Passes), slog.Int("full_passes", tr.FullPasses), slog.Int("bound", s.cfg.Bound),
		slog.Duration("duration", tr.Duration),
	}
	// A backlog warning matters most when the run was cut short.
	lctx := context.WithoutCancel(ctx)
	switch {
	case tr.Backlog:
		s.cfg.Logger.LogAttrs(lctx, slog.LevelWarn,
			"sweeper: backlog remains: the run ended on a pass that read a full bound, rows past retention are left for the next run",
			append(attrs, slog.Duration("budget", s.cfg.Budget))...)
	case tr.Read > 0:
		s.cfg.Logger.LogAttrs(lctx, slog.LevelInfo, "sweeper: swept", attrs...)
	default:
		s.cfg.Logger.LogAttrs(lctx, slog.LevelDebug, "sweeper: nothing past retention", attrs...)
	}
}

// pass reads at most Bound rows of t past retention, locking them, and
// deletes those still past it, in one transaction per shard (one on
// PostgreSQL). A failed transaction counts nothing; the failures are
// returned joined.
func (s *Sweeper) pass(ctx context.Context, t target) (read, deleted int, err error) {
	args := pgx.NamedArgs{"now": s.cfg.Clock.Arg(), "bound": s.cfg.Bound}
	maps.Copy(args, t.extra)
	err = t.pass.Run(ctx, s.db, s.cfg.Bound, args, func(ctx context.Context, g shardpass.Group) error {
		r, d, err := s.step(ctx, t, g.Args(args))
		read, deleted = read+r, deleted+d
		return err
	})
	return read, deleted, err
}

// step is one transaction of a pass, on one shard group.
func (s *Sweeper) step(ctx context.Context, t target, args pgx.NamedArgs) (read, deleted int, err error) {
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, t.sql.read, args)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		var (
			ids   = make([]uuid.UUID, 0, s.cfg.Bound)
			ctids = make([]pgtype.TID, 0, s.cfg.Bound)
			id    uuid.UUID
			ctid  pgtype.TID
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &ctid}, func() error {
			ids, ctids = append(ids, id), append(ctids, ctid)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if read = len(ids); read == 0 {
			return nil
		}
		if s.cfg.beforeDelete != nil {
			if err := s.cfg.beforeDelete(ctx, t.table, ids); err != nil {
				return err
			}
		}
		del := maps.Clone(args)
		del["ctids"], del["ids"] = ctids, ids
		tag, err := tx.Exec(ctx, t.sql.delete, del)
		if err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		deleted = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return read, deleted, nil
}

// restAfter returns the rest after a full pass that took d, so that passes
// take at most Duty of the run's time.
func (s *Sweeper) restAfter(d time.Duration) time.Duration {
	if s.cfg.Duty >= 1 {
		return 0
	}
	return time.Duration(float64(d) * (1/s.cfg.Duty - 1))
}

// Run sweeps until ctx ends: first after up to Jitter; again at once while
// a run leaves a backlog; otherwise after the time half a Bound took to
// come due (within [MinWait] and Interval, plus up to a tenth at random).
// A quick run sweeps only the tables the last run deleted from, so a
// costly table with rarely anything due is still read only every
// Interval. A failed run is logged and the next retries. Run returns when
// ctx ends; the pass in progress rolls back.
func (s *Sweeper) Run(ctx context.Context) {
	var (
		since = s.cfg.now() // the start of the window the next run sweeps
		full  = since       // the start of the last run of every table
		only  map[string]bool
	)
	loop.Loop{First: s.jitter(), Clock: s.cfg.wait}.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		start := s.cfg.now()
		if only == nil {
			full = start
		}
		rep, err := s.run(ctx, only)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "sweeper: run failed; the next run retries",
				slog.String("error", err.Error()))
		}
		var wait time.Duration
		wait, only = s.next(rep, start.Sub(since))
		if only != nil && s.cfg.now().Add(wait).Sub(full) >= s.cfg.Interval {
			only = nil
		}
		since = start
		return loop.Next{Wait: wait, Now: wait <= 0}, nil
	})
}

// MinWait is the shortest wait of [Sweeper.Run] between two runs that left
// no backlog, however fast rows come due.
const MinWait = time.Second

// next returns the wait of [Sweeper.Run] after rep, whose rows came due
// over window, and the tables the next run sweeps (nil: all). A run that
// failed without a backlog (the database is down) waits the Interval.
func (s *Sweeper) next(rep Report, window time.Duration) (time.Duration, map[string]bool) {
	if rep.Backlog() {
		return rep.rest, nil
	}
	most, deleted := 0, map[string]bool{}
	for _, t := range rep.Tables() {
		most = max(most, t.Deleted)
		if t.Deleted > 0 {
			deleted[t.Table] = true
		}
	}
	if most == 0 || window <= 0 {
		return s.cfg.Interval + s.jitter(), nil
	}
	half := time.Duration(float64(window) * float64(s.cfg.Bound) / 2 / float64(most))
	if half >= s.cfg.Interval {
		return s.cfg.Interval + s.jitter(), nil
	}
	w := max(half, MinWait)
	return w + rand.N(w/10+1), deleted
}

func (s *Sweeper) jitter() time.Duration {
	if s.cfg.Jitter <= 0 {
		return 0
	}
	return rand.N(s.cfg.Jitter + 1)
}
