// Package dbdeadline bounds how long searchd waits for PostgreSQL's answer
// to any one call: a statement, a batch, a prepare, a copy, or a
// connection from the pool.
//
// PostgreSQL's own bounds (statement_timeout, lock_timeout) act only
// when the server hears the statement. A database that is unreachable
// without refusing (a network that drops packets, a partition, a proxy or
// load balancer that accepts connections and never answers: a blackholed
// primary) answers nothing, and a call left to itself waits for as long
// as its context lets it: a request whose client went away waits no more,
// but a background loop (the applier, the sweeper) waits forever, and
// each waiting call holds a pool connection, so new requests queue behind
// them. [Tracer] gives every call a deadline of its own, derived from its
// context (an earlier deadline of the caller still wins): past it the
// call fails with context.DeadlineExceeded, pgx closes its connection, and
// internal/dberr reads the error as transient, so the request answers 503
// unavailable with Retry-After.
//
// It is a pgx tracer because pgx gives a tracer the context each call
// runs on; it traces nothing. Compose it with others with
// github.com/jackc/pgx/v5/multitracer.
package dbdeadline

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tracer gives each call the deadline Timeout from its start; a Timeout of
// zero or less gives none. Its zero value does nothing. It is safe for
// concurrent use.
type Tracer struct {
	Timeout time.Duration
}

// cancelKey keys the cancel function of a call's deadline in its context,
// so the call's end releases the deadline's timer at once.
type cancelKey struct{}

func (t Tracer) start(ctx context.Context) context.Context {
	if t.Timeout <= 0 {
		return ctx
	}
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	return context.WithValue(ctx, cancelKey{}, cancel)
}

// end releases the deadline the call's start set, found in its context.
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

// TraceAcquireStart bounds taking a connection from the pool: the wait for
// a free one, a new connection's connect, the ping of an idle one.
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
