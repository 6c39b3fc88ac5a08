package pgtest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Tracer is a pgx tracer counting what a pool costs the database: round
// trips, statements, commits, and time waiting for answers. It is safe for
// concurrent use and cheap (a few atomic adds per statement).
//
// A round trip is a Query, QueryRow, Exec or SendBatch. A commit is a
// COMMIT, or an autocommit statement or batch that wrote a row: what makes
// PostgreSQL flush its WAL.
type Tracer struct {
	roundTrips atomic.Int64
	statements atomic.Int64
	commits    atomic.Int64
	busy       atomic.Int64 // nanoseconds from sending to the last answer

	recording atomic.Bool
	mu        sync.Mutex
	recorded  [][]string
}

// Counts are a Tracer's totals.
type Counts struct {
	RoundTrips, Statements, Commits int64
	// Busy is the time from sending round trips to their answers.
	Busy time.Duration
}

// Sub returns c minus earlier.
func (c Counts) Sub(earlier Counts) Counts {
	return Counts{c.RoundTrips - earlier.RoundTrips, c.Statements - earlier.Statements,
		c.Commits - earlier.Commits, c.Busy - earlier.Busy}
}

// Add returns c plus other.
func (c Counts) Add(other Counts) Counts {
	return Counts{c.RoundTrips + other.RoundTrips, c.Statements + other.Statements,
		c.Commits + other.Commits, c.Busy + other.Busy}
}

// Counts returns the totals so far.
func (t *Tracer) Counts() Counts {
	return Counts{t.roundTrips.Load(), t.statements.Load(), t.commits.Load(), time.Duration(t.busy.Load())}
}

// Record runs f and returns the statements run meanwhile, one slice per
// round trip. f must be the pool's only user.
func (t *Tracer) Record(f func() error) ([][]string, error) {
	t.mu.Lock()
	t.recorded = nil
	t.mu.Unlock()
	t.recording.Store(true)
	err := f()
	t.recording.Store(false)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recorded, err
}

func (t *Tracer) record(sqls ...string) {
	if t.recording.Load() {
		t.mu.Lock()
		t.recorded = append(t.recorded, sqls)
		t.mu.Unlock()
	}
}

type traceKey struct{}

// traceStart is carried from a round trip's start to its end.
type traceStart struct {
	at         time.Time
	autocommit bool // the connection was outside a transaction when it began
	wrote      bool // batches: a statement of it wrote a row
	explicit   bool // batches: it began a transaction itself
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *Tracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.roundTrips.Add(1)
	t.statements.Add(1)
	t.record(d.SQL)
	return context.WithValue(ctx, traceKey{}, &traceStart{at: time.Now(), autocommit: conn.PgConn().TxStatus() == 'I'})
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	st, ok := ctx.Value(traceKey{}).(*traceStart)
	if !ok {
		return
	}
	t.busy.Add(int64(time.Since(st.at)))
	if d.Err == nil && (isCommit(d.CommandTag) || st.autocommit && wroteRows(d.CommandTag)) {
		t.commits.Add(1)
	}
}

// TraceBatchStart implements pgx.BatchTracer.
func (t *Tracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	t.roundTrips.Add(1)
	sqls := make([]string, len(d.Batch.QueuedQueries))
	for i, q := range d.Batch.QueuedQueries {
		sqls[i] = q.SQL
	}
	t.record(sqls...)
	st := &traceStart{at: time.Now(), autocommit: conn.PgConn().TxStatus() == 'I',
		explicit: len(sqls) > 0 && strings.EqualFold(strings.TrimSpace(sqls[0]), "begin")}
	return context.WithValue(ctx, traceKey{}, st)
}

// TraceBatchQuery implements pgx.BatchTracer.
func (t *Tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.statements.Add(1)
	if d.Err != nil {
		return
	}
	if isCommit(d.CommandTag) {
		t.commits.Add(1)
	}
	if st, ok := ctx.Value(traceKey{}).(*traceStart); ok && wroteRows(d.CommandTag) {
		st.wrote = true
	}
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *Tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchEndData) {
	st, ok := ctx.Value(traceKey{}).(*traceStart)
	if !ok {
		return
	}
	t.busy.Add(int64(time.Since(st.at)))
	// A batch outside a transaction is one implicit transaction, committed
	// if nothing failed.
	if d.Err == nil && st.autocommit && !st.explicit && st.wrote {
		t.commits.Add(1)
	}
}

func isCommit(tag pgconn.CommandTag) bool { return tag.String() == "COMMIT" }

func wroteRows(tag pgconn.CommandTag) bool {
	return (tag.Insert() || tag.Update() || tag.Delete()) && tag.RowsAffected() > 0
}
