// Package dbdeadline bounds how long searchd waits for PostgreSQL to answer
// any one call: a statement, batch, prepare, copy, or pool acquire.
//
// statement_timeout and lock_timeout act only once the server hears the
// statement; an unreachable database that does not refuse (a blackholed
// primary) answers nothing, and a background loop would wait forever while
// holding a pool connection. [Tracer] gives each call its own deadline
// (an earlier caller deadline still wins); past it pgx closes the
// connection and internal/dberr classifies the error as transient (503).
//
// It is a pgx tracer only to get each call's context; it traces nothing.
// Combine it with others via github.com/jackc/pgx/v5/multitracer.
package dbdeadline

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tracer gives each call a deadline Timeout after its start; a Timeout
// <= 0 gives none. It is safe for concurrent use.
type Tracer struct {
	Timeout time.Duration
}

// cancelKey keys the deadline's cancel func in the call's context, so the
// call's end releases the timer.
type cancelKey struct{}

func (t Tracer) start(ctx context.Context) context.Context {
	if t.Timeout <= 0 {
		return ctx
	}
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	return context.WithValue(ctx, cancelKey{}, cancel)
}

func end(ctx context.Context) {
	if cancel, ok := ctx.Value(cancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

// TraceQueryStart bounds Exec, Query and QueryRow (and so Begin and
// Commit) until the rows are closed.
func (t Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return t.start(ctx)
}

// TraceQueryEnd releases the query's deadline.
func (Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) { end(ctx) }

// TraceBatchStart bounds a batch until its results are closed.
func (t Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return t.start(ctx)
}

// TraceBatchQuery does nothing: the batch's deadline covers its queries.
func (Tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd releases the batch's deadline.
func (Tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) { end(ctx) }

// TracePrepareStart bounds a prepare.
func (t Tracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return t.start(ctx)
}

// TracePrepareEnd releases the prepare's deadline.
func (Tracer) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareEndData) { end(ctx) }

// TraceCopyFromStart bounds a copy.
func (t Tracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return t.start(ctx)
}

// TraceCopyFromEnd releases the copy's deadline.
func (Tracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromEndData) {
	end(ctx)
}

// TraceAcquireStart bounds a pool acquire, including connect and ping.
func (t Tracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return t.start(ctx)
}

// TraceAcquireEnd releases the acquire's deadline.
func (Tracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	end(ctx)
}

var (
	_ pgx.QueryTracer       = Tracer{}
	_ pgx.BatchTracer       = Tracer{}
	_ pgx.PrepareTracer     = Tracer{}
	_ pgx.CopyFromTracer    = Tracer{}
	_ pgxpool.AcquireTracer = Tracer{}
)
