package sweeper

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/keyset"
)

// Recorder is told of every run when it ends, from the sweeping goroutine,
// on a context that outlives the run's (a run cut short is recorded too).
// [RunLog] is one.
type Recorder interface {
	RecordRun(ctx context.Context, r RunRecord)
}

// RunRecord is one finished run as a [Recorder] is told of it.
type RunRecord struct {
	Report Report
	Err    error
	Bound  int
}

// RunLog records runs in agent.sweeper_runs, for the console, and reads
// them back. It is safe for concurrent use.
type RunLog struct {
	db      *pgxpool.Pool
	via     string
	clock   *dbclock.Clock
	onError func(error)
	cursors keyset.Key
}

// Who ran the sweeper, as [RunLog] records it.
const (
	ViaServe = "serve"
	ViaSweep = "sweep"
)

// RunRetention is how long a recorded run is kept; each recorded run
// deletes at most 100 older ones.
const RunRetention = 30 * 24 * time.Hour

// NewRunLog returns a run log on db recording runs as made by via
// (ViaServe or ViaSweep). onError, when not nil, is told of a run that
// could not be recorded. A nil clock is the database's now().
func NewRunLog(db *pgxpool.Pool, via string, clock *dbclock.Clock, onError func(error)) *RunLog {
	return &RunLog{db: db, via: via, clock: clock, onError: onError}
}

// Cursors returns a copy of l whose lists sign their cursors with k.
func (l *RunLog) Cursors(k keyset.Key) *RunLog {
	c := *l
	c.cursors = k
	return &c
}

type tableJSON struct {
	Table      string `json:"table"`
	Read       int    `json:"read"`
	Deleted    int    `json:"deleted"`
	Passes     int    `json:"passes"`
	DurationUS int64  `json:"duration_us"`
	Backlog    bool   `json:"backlog"`
}

// RecordRun inserts r into agent.sweeper_runs.
func (l *RunLog) RecordRun(ctx context.Context, r RunRecord) {
	tables := make([]tableJSON, 0, 4)
	for _, tr := range r.Report.Tables() {
		if tr.Table == "" {
			continue // not reached
		}
		tables = append(tables, tableJSON{tr.Table, tr.Read, tr.Deleted, tr.Passes, tr.Duration.Microseconds(), tr.Backlog})
	}
	doc, err := json.Marshal(tables)
	if err == nil {
		var msg any // NULL when the run succeeded
		if r.Err != nil {
			msg = r.Err.Error()
		}
		_, err = l.db.Exec(ctx, sweeperRunInsert, ids.New(), l.via, r.Bound, 0, string(doc),
			r.Report.Backlog(), msg, r.Report.Duration.Microseconds(), RunRetention.Microseconds(), l.clock.Arg())
	}
	if err != nil && l.onError != nil {
		l.onError(fmt.Errorf("sweeper: record the run: %w", err))
	}
}

// RunEntry is one recorded run.
type RunEntry struct {
	ID         uuid.UUID
	StartedAt  time.Time
	FinishedAt time.Time
	Via        string
	Bound      int
	// MaxPasses is 0 but for runs recorded by an older release, which
	// bounded a run by its passes rather than its time.
	MaxPasses int
	Tables    []TableReport
	Backlog   bool
	Error     string // "" when the run succeeded
}

// ErrInvalidCursor reports a [RunLog.List] cursor this package did not
// write.
var ErrInvalidCursor = keyset.InvalidCursor("sweeper")

// List returns a page of recorded runs, newest first, of at most limit
// (1 to 200; zero or less is 50) and the next page's cursor ("" after the
// last). It returns [ErrInvalidCursor] for a cursor it did not write.
func (l *RunLog) List(ctx context.Context, backlogOnly bool, limit int, cursor string) ([]RunEntry, string, error) {
	q, err := l.cursors.Read(keyset.List{Name: "sweeper.runs"}, cursor, limit, 50, 200)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	return keyset.Query(ctx, l.db, "sweeper: list runs", q, func(row pgx.CollectableRow) (RunEntry, error) {
		var (
			e      RunEntry
			tables []tableJSON
		)
		if err := row.Scan(&e.ID, &e.StartedAt, &e.FinishedAt, &e.Via, &e.Bound, &e.MaxPasses, &tables, &e.Backlog, &e.Error); err != nil {
			return e, err
		}
		for _, t := range tables {
			e.Tables = append(e.Tables, TableReport{Table: t.Table, Read: t.Read, Deleted: t.Deleted, Passes: t.Passes,
				Duration: time.Duration(t.DurationUS) * time.Microsecond, Backlog: t.Backlog})
		}
		return e, nil
	}, func(e RunEntry) keyset.Position { return keyset.Position{CreatedAt: e.FinishedAt, ID: e.ID} },
		sweeperRunPage, q.At, q.ID, q.Limit+1, backlogOnly)
}

// sweeperRunInsert records a run and prunes at most 100 runs past
// RunRetention. $8 is the duration and $9 the retention, in µs.
const sweeperRunInsert = `
WITH c AS (SELECT coalesce($10::timestamptz, now()) AS now),
pruned AS (
	DELETE FROM agent.sweeper_runs
	WHERE id IN (
		SELECT r.id FROM agent.sweeper_runs r, c
		WHERE r.finished_at < c.now - $9::bigint * interval '1 microsecond'
		ORDER BY r.finished_at
		LIMIT 100)
)
INSERT INTO agent.sweeper_runs (id, started_at, finished_at, via, bound, max_passes, tables, backlog, error)
SELECT $1, c.now - $8::bigint * interval '1 microsecond', c.now, $2, $3, $4, $5::jsonb, $6, $7
FROM c`

// sweeperRunPage reads recorded runs newest first after ($1 finished_at,
// $2 id). $3 limit, $4 backlog only.
const sweeperRunPage = `
SELECT r.id, r.started_at, r.finished_at, r.via, r.bound, r.max_passes, r.tables, r.backlog, coalesce(r.error, '')
FROM agent.sweeper_runs r
WHERE (NOT $4::boolean OR r.backlog)
	AND (r.finished_at, r.id) < (coalesce($1::timestamptz, 'infinity'),
		coalesce($2::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY r.finished_at DESC, r.id DESC
LIMIT $3`
