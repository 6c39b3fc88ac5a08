// Package shardpass runs a bounded background pass over a table one shard
// at a time, so no lock or ctid of the pass spans shards.
//
// On Citus a row lock needs a statement routed to one shard, and a ctid
// names a row within one shard. A [Pass] therefore first reads, without
// locking, the distribution column of the due rows and groups them by
// shard, then calls the worker's step once per shard with that shard's
// keys and share of the bound; the step filters on column = ANY(@keys),
// which Citus routes to the one shard. For a table that is not distributed
// (including plain PostgreSQL) the step runs once with @all set and the
// whole bound. The step's SQL is the same either way:
//
//	WHERE (@all::boolean OR k.organization_id = ANY(@keys::uuid[]))
//
// Distribution is checked on every run, so a table distributed by a later
// migration is swept per shard from its next pass on. Each shard's step is
// its own transaction and fails alone.
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

// Clock returns agent.clock(now): now (a test's stub) or, when nil, the
// database's now(). Read it once per pass so every shard's step uses one
// instant.
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

// New returns the pass over the schema-qualified table. due selects the
// distribution column, cast to text, of each due row (one output row per
// row), oldest first, LIMIT @limit. It may use the parameters given to
// [Pass.Run], and @all (true) and @keys (empty), to share a condition with
// the steps.
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
	// All is set when the table is not distributed; Keys is nil then.
	All bool
	// Shard is the Citus shard id of the group; 0 with All.
	Shard int64
	// Keys are the due rows' distribution column values, as text.
	Keys []string
	// Limit is the most rows the step may take: the shard's due count,
	// or the whole bound with All.
	Limit int
}

// Args returns a copy of args with the group's @all, @keys and @limit.
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

// Run makes one pass of at most bound rows, calling step once per shard
// in shard id order (or once with All), and stops when ctx ends. It
// returns an error if bound < 1 or the reads fail (no step ran then);
// otherwise it returns the steps' errors joined, each naming its shard.
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
	read := Group{All: true, Limit: bound}.Args(args)
	read["table"] = p.table
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
