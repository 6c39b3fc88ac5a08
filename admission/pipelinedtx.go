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
// connection, with BEGIN and COMMIT riding in the first and last batch, so
// it costs one round trip per batch.
type pipelinedTx struct {
	conn  *pgxpool.Conn
	begun bool
}

// inPipelinedTx runs fn with a pipelinedTx on a pooled connection. Whatever
// fn does, an open or aborted transaction is rolled back (detached,
// bounded by rollbackTimeout) before the connection is returned. Nothing is
// kept unless fn calls [pipelinedTx.commit].
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

// batch returns a new batch; the first one begins the transaction.
func (tx *pipelinedTx) batch() *pgx.Batch {
	b := &pgx.Batch{}
	if !tx.begun {
		b.Queue("begin")
		tx.begun = true
	}
	return b
}

// send sends b and returns its first statement error, which aborts the
// transaction.
func (tx *pipelinedTx) send(ctx context.Context, b *pgx.Batch) error {
	return tx.conn.SendBatch(ctx, b).Close()
}

// commit appends COMMIT to b and sends it. It fails unless the server
// answered COMMIT (an aborted transaction answers ROLLBACK).
func (tx *pipelinedTx) commit(ctx context.Context, b *pgx.Batch) error {
	b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return fmt.Errorf("admission: the transaction ended with %s", tag)
		}
		return nil
	})
	return tx.send(ctx, b)
}
