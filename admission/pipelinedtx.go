package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pipelinedTx is one transaction sent as pipelined batches, BEGIN and COMMIT
// riding in the first and last: one round trip per batch.
type pipelinedTx struct {
	conn  *pgxpool.Conn
	begun bool
}

// inPipelinedTx runs fn in a pipelinedTx on a pooled connection. Nothing is
// kept unless fn commits; an open transaction is rolled back (detached,
// bounded by rollbackTimeout) before the connection is returned.
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

func (tx *pipelinedTx) batch() *pgx.Batch {
	b := &pgx.Batch{}
	if !tx.begun {
		b.Queue("begin")
		tx.begun = true
	}
	return b
}

// send returns b's first statement error, which aborts the transaction.
func (tx *pipelinedTx) send(ctx context.Context, b *pgx.Batch) error {
	return tx.conn.SendBatch(ctx, b).Close()
}

// commit appends COMMIT to b and sends it; it fails unless the server
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
