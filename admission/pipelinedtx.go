package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pipelinedTx is one transaction sent as pipelined batches on one
// connection: BEGIN rides at the head of its first batch and COMMIT at the
// tail of its last, so the transaction costs one round trip per batch
// (pgx's Begin would add one of its own). Its scope is one call of
// inPipelinedTx.
type pipelinedTx struct {
	conn  *pgxpool.Conn
	begun bool
}

// inPipelinedTx runs fn with a pipelinedTx on a connection of pool. When
// fn returns, however it ended, a transaction still open or aborted on the
// connection is rolled back (on a context detached from ctx, bounded by
// rollbackTimeout) before the connection goes back to the pool, so a
// failed batch never leaves it dirty. fn commits with [pipelinedTx.commit];
// without it nothing fn sent is kept.
func inPipelinedTx(ctx context.Context, pool *pgxpool.Pool, rollbackTimeout time.Duration, fn func(*pipelinedTx) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	defer func() {
		if conn.Conn().IsClosed() || conn.Conn().PgConn().TxStatus() == 'I' {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_, _ = conn.Exec(rctx, "rollback")
	}()
	return fn(&pipelinedTx{conn: conn})
}

// batch returns a new batch of the transaction; the first one it returns
// begins it.
func (tx *pipelinedTx) batch() *pgx.Batch {
	b := &pgx.Batch{}
	if !tx.begun {
		b.Queue("begin")
		tx.begun = true
	}
	return b
}

// send sends b and reads every result; the first error of its statements
// is returned, and the transaction is then aborted.
func (tx *pipelinedTx) send(ctx context.Context, b *pgx.Batch) error {
	return tx.conn.SendBatch(ctx, b).Close()
}

// commit queues COMMIT at the end of b and sends it. It fails unless the
// server answered COMMIT (an aborted transaction answers ROLLBACK).
func (tx *pipelinedTx) commit(ctx context.Context, b *pgx.Batch) error {
	b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return fmt.Errorf("admission: the transaction ended with %s", tag)
		}
		return nil
	})
	return tx.send(ctx, b)
}
