// Package shardpass runs a bounded background pass over a table one shard
// at a time, so that no lock and no ctid of the pass ever spans shards.
//
// On PostgreSQL a table is one heap, and a background worker's pass (read
// the due rows FOR UPDATE SKIP LOCKED, then delete or lease them, by ctid
// or by id) is one statement over it. On Citus a table distributed by a
// column is many shards on many nodes: a row lock is taken only by a
// statement routed to one shard (Citus refuses FOR UPDATE on any other),
// and a ctid names a row inside one shard. A [Pass] splits the work:
//
//  1. it reads, without locking, the distribution column of the rows due
//     (the worker's own query: the oldest first, at most the pass's
//     bound), and groups them by the shard that holds them;
//  2. it calls the worker's step once per group, with the group's values
//     and its share of the bound. The step filters on
//     column = ANY(@keys), which Citus routes to that one shard, so its
//     locks, its ctids and its transaction stay on one node.
//
// On plain PostgreSQL, and for a table that is not distributed (a local
// table on the coordinator), it skips the read and calls the step once with
// @all set and the whole bound: the statement the worker always ran. The
// step's SQL is the same in both cases:
//
//	WHERE (@all::boolean OR k.organization_id = ANY(@keys::uuid[]))
//
// Whether a table is distributed is asked of the database on every run
// (agent.is_distributed, migration 00019), so a table distributed by a
// later migration is swept per shard from its next pass on.
//
// A pass over several shards is several transactions, one per shard: each
// step commits or fails alone. A step that fails (its worker is down) does
// not stop the steps of the other shards; [Pass.Run] returns every
// failure joined. A pass never reads more than its bound: the groups'
// shares add up to the rows the first read found, at most the bound.
//
// Example (the sweeper's pass over expired claims; the inbox applier's
// lease of pending arrivals is built the same way):
//
//	var expired = shardpass.New("agent.idempotency_keys", `
//		SELECT k.organization_id::text FROM agent.idempotency_keys k
//		WHERE k.retain_until <= coalesce(@now::timestamptz, now())
//		ORDER BY k.retain_until LIMIT @limit`)
//
//	err := expired.Run(ctx, pool, 1000, pgx.NamedArgs{"now": nil}, func(ctx context.Context, g shardpass.Group) error {
//		_, err := pool.Exec(ctx, `
//			DELETE FROM agent.idempotency_keys k
//			WHERE k.ctid IN (SELECT ctid FROM agent.idempotency_keys
//				WHERE (@all::boolean OR organization_id = ANY(@keys::uuid[]))
//					AND retain_until <= coalesce(@now::timestamptz, now())
//				ORDER BY retain_until LIMIT @limit FOR UPDATE SKIP LOCKED)
//				AND (@all::boolean OR k.organization_id = ANY(@keys::uuid[]))`,
//			g.Args(pgx.NamedArgs{"now": nil}))
//		return err
//	})
package shardpass

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"
)

// DB is what a pass reads with; a *pgxpool.Pool has it.
type DB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Clock reads the database clock, agent.clock(now): now, a test's stub,
// or else the database's now() when now is nil. A pass reads it once, so
// every shard's step judges by that one instant. Its error is the query's.
func Clock(ctx context.Context, db DB, now any) (time.Time, error) {
	var clock time.Time
	err := db.QueryRow(ctx, `SELECT agent.clock($1::timestamptz)`, now).Scan(&clock)
	return clock, err
}

// Pass is a bounded background pass over one table. It is safe for
// concurrent use.
type Pass struct {
	table   string
	grouped string
}

// New returns the pass over table (schema-qualified, as in
// "agent.idempotency_keys"). due is the worker's read of what a pass
// handles: a SELECT of one column, the table's distribution column cast to
// text, of each row due (one row per row, not per value), ordered oldest
// first and limited to @limit. It may name other parameters, given to
// [Pass.Run], and @all (true) and @keys (empty), so that it may share a
// condition with the steps' statements.
func New(table, due string) *Pass {
	return &Pass{
		table: table,
		grouped: `
SELECT agent.shard_of(@table::regclass, d.key), array_agg(DISTINCT d.key), count(*)
FROM (` + due + `) AS d(key)
GROUP BY 1
ORDER BY 1`,
	}
}

// Group is one step of a pass: the rows of one shard, or all of them.
type Group struct {
	// All is set when the table is not distributed: the step takes from
	// the whole table, and Keys is nil.
	All bool
	// Shard is the Citus shard id of the group; 0 with All.
	Shard int64
	// Keys are the values of the distribution column (as text) of the due
	// rows the first read found in this shard.
	Keys []string
	// Limit is the most rows the step may take: how many due rows the
	// first read found in this shard, or the whole bound with All.
	Limit int
}

// Args returns args with the group's @all, @keys and @limit added, for the
// step's statements. args itself is not changed.
func (g Group) Args(args pgx.NamedArgs) pgx.NamedArgs {
	out := maps.Clone(args)
	if out == nil {
		out = pgx.NamedArgs{}
	}
	keys := g.Keys
	if keys == nil {
		keys = []string{}
	}
	out["all"], out["keys"], out["limit"] = g.All, keys, g.Limit
	return out
}

// Run makes one pass of at most bound rows: it calls step once with All
// when the table is not distributed; otherwise it reads the due rows' keys
// (due with @limit = bound and args), and calls step once per shard that
// holds some, in the order of the shard ids. It stops calling steps when
// ctx ends.
//
// It returns an error when bound is less than 1, when the reads fail
// (nothing was stepped then), and every step's error joined, each naming
// its shard.
func (p *Pass) Run(ctx context.Context, db DB, bound int, args pgx.NamedArgs, step func(context.Context, Group) error) error {
	if bound < 1 {
		return fmt.Errorf("shardpass: %s: bound %d: must be at least 1", p.table, bound)
	}
	var distributed bool
	if err := db.QueryRow(ctx, `SELECT agent.is_distributed($1::regclass)`, p.table).Scan(&distributed); err != nil {
		return fmt.Errorf("shardpass: %s: is it distributed: %w", p.table, err)
	}
	if !distributed {
		return step(ctx, Group{All: true, Limit: bound})
	}
	read := maps.Clone(args)
	if read == nil {
		read = pgx.NamedArgs{}
	}
	read["table"], read["limit"], read["all"], read["keys"] = p.table, bound, true, []string{}
	rows, err := db.Query(ctx, p.grouped, read)
	if err != nil {
		return fmt.Errorf("shardpass: %s: read the due rows: %w", p.table, err)
	}
	groups, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Group, error) {
		var g Group
		var n int64
		err := r.Scan(&g.Shard, &g.Keys, &n)
		g.Limit = int(n)
		return g, err
	})
	if err != nil {
		return fmt.Errorf("shardpass: %s: read the due rows: %w", p.table, err)
	}
	var errs []error
	for _, g := range groups {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		if err := step(ctx, g); err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", g.Shard, err))
		}
	}
	return errors.Join(errs...)
}
