package pgtest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Statement is one statement a pool sent, with positional arguments.
type Statement struct {
	SQL  string
	Args []any
}

// StatementLog is a pgx tracer that records every statement a pool sends,
// batches included. It is safe for concurrent use.
type StatementLog struct {
	mu  sync.Mutex
	all []Statement
}

func (l *StatementLog) add(ctx context.Context, conn *pgx.Conn, sql string, args []any) {
	if len(args) > 0 {
		// pgx rewrites named arguments after the query tracer sees them.
		if rw, ok := args[0].(pgx.QueryRewriter); ok {
			var err error
			if sql, args, err = rw.RewriteQuery(ctx, conn, sql, args[1:]); err != nil {
				return
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, Statement{SQL: sql, Args: slices.Clone(args)})
}

// TraceQueryStart records a query.
func (l *StatementLog) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.add(ctx, conn, d.SQL, d.Args)
	return ctx
}

// TraceQueryEnd does nothing.
func (l *StatementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart does nothing.
func (l *StatementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery records a statement of a batch.
func (l *StatementLog) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.add(ctx, conn, d.SQL, d.Args)
}

// TraceBatchEnd does nothing.
func (l *StatementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// distinct returns one statement per SQL text, with its first arguments,
// in order first sent.
func (l *StatementLog) distinct() []Statement {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]bool{}
	var out []Statement
	for _, s := range l.all {
		if !seen[s.SQL] {
			seen[s.SQL] = true
			out = append(out, s)
		}
	}
	return out
}

// WantRouted EXPLAINs on db, a Citus cluster, each distinct statement l
// recorded, with its first arguments, and fails t for any that is not a
// router query (more than one task, or distributed subplans) or cannot be
// EXPLAINed, and when fewer than minRouted were routed to one shard: the
// recording missed the path under test. Statements without a Citus scan
// run on the coordinator; transaction control is not EXPLAINed.
func (l *StatementLog) WantRouted(t testing.TB, db *pgxpool.Pool, minRouted int) {
	t.Helper()
	ctx := context.Background()
	statements := l.distinct()
	routed := 0
	for _, s := range statements {
		tasks, subplans, err := explainTasks(ctx, db, s)
		switch {
		case err != nil:
			t.Errorf("EXPLAIN %s: %v", oneLine(s.SQL), err)
		case subplans > 0:
			t.Errorf("planned in %d steps (distributed subplans), not routed to one shard:\n%s", subplans+1, oneLine(s.SQL))
		case slices.ContainsFunc(tasks, func(n int) bool { return n != 1 }):
			t.Errorf("sent to %v shards, not routed to one:\n%s", tasks, oneLine(s.SQL))
		case len(tasks) > 0:
			routed++
		}
	}
	if routed < minRouted {
		t.Errorf("%d of %d recorded statements read a distributed table, want at least %d: the recording is broken or missed the path under test",
			routed, len(statements), minRouted)
	}
	t.Logf("%d distinct statements, %d routed to one shard, %d on the coordinator alone", len(statements), routed, len(statements)-routed)
}

// explainTasks returns the task count of each Citus scan in s's plan and
// the number of distributed subplans.
func explainTasks(ctx context.Context, db *pgxpool.Pool, s Statement) (tasks []int, subplans int, err error) {
	switch strings.ToLower(strings.Fields(s.SQL)[0]) {
	case "begin", "commit", "rollback", "listen", "unlisten", "set", "savepoint", "release":
		return nil, 0, nil
	}
	var doc string
	if err := db.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+s.SQL, s.Args...).Scan(&doc); err != nil {
		return nil, 0, err
	}
	var plan any
	if err := json.Unmarshal([]byte(doc), &plan); err != nil {
		return nil, 0, err
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch k {
				case "Task Count":
					if n, ok := x.(float64); ok {
						tasks = append(tasks, int(n))
					}
				case "Subplans":
					if l, ok := x.([]any); ok {
						subplans += len(l)
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(plan)
	return tasks, subplans, nil
}

func oneLine(sql string) string { return strings.Join(strings.Fields(sql), " ") }
