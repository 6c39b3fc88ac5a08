package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/pgtest"
	"github.com/searchd/searchd/tools"
)

// statement is one statement a pool sent, with its arguments, positional.
type statement struct {
	sql  string
	args []any
}

// statementLog records every statement sent on the connections of a pool:
// queries, executions and the statements of batches (a pgx tracer).
type statementLog struct {
	mu  sync.Mutex
	all []statement
}

func (l *statementLog) add(ctx context.Context, conn *pgx.Conn, sql string, args []any) {
	if len(args) > 0 {
		// Named arguments: pgx rewrites them after the tracer of a query
		// has seen them (a batch's are rewritten already).
		if rw, ok := args[0].(pgx.QueryRewriter); ok {
			var err error
			if sql, args, err = rw.RewriteQuery(ctx, conn, sql, args[1:]); err != nil {
				return
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, statement{sql: sql, args: slices.Clone(args)})
}

func (l *statementLog) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.add(ctx, conn, d.SQL, d.Args)
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *statementLog) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.add(ctx, conn, d.SQL, d.Args)
}

func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// distinct returns the statements sent, one per SQL text (its first
// arguments), in the order first sent.
func (l *statementLog) distinct() []statement {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]bool{}
	var out []statement
	for _, s := range l.all {
		if !seen[s.sql] {
			seen[s.sql] = true
			out = append(out, s)
		}
	}
	return out
}

// tracedPool is a pool on a fresh test database whose statements log
// records.
func tracedPool(t *testing.T, log *statementLog) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDBURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = log
	cfg.MaxConns = pgtest.DefaultMaxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestEveryRequestStatementIsRoutedToOneShard is issue 25.2: on a Citus
// cluster (make test-citus), every statement of the request path is a
// router query, planned to run on one shard (one shard group, for a
// join of co-located tables). It records every statement a server sends
// while it answers a valid request on every route of the API, twice (a
// replay), the starts' replays and Prefer: wait, provider callbacks of
// every ending, and tool calls through tools.Runner; then it asks the
// coordinator to EXPLAIN each with the arguments it was sent with, and
// fails for any Citus scan of more than one task, or any statement
// planned in several steps (a distributed subplan). A statement whose
// plan has no Citus scan reads no distributed table: it runs on the
// coordinator alone (BEGIN, a NOTIFY, the readiness check, the drop audit).
func TestEveryRequestStatementIsRoutedToOneShard(t *testing.T) {
	if !pgtest.Citus() {
		t.Skip("runs on a Citus cluster: make test-citus")
	}
	t.Parallel()
	log := &statementLog{}
	pool := tracedPool(t, log)
	w := newWorld(t, setupOpts{pool: pool})
	ctx := context.Background()

	for _, r := range w.routes() {
		if publicRoutes[r.String()] {
			continue
		}
		rq := w.validRequest(r)
		for range 2 {
			if res := w.do(rq); res.status >= 500 {
				t.Fatalf("%s = %d %s", r, res.status, res.body)
			}
		}
	}
	// A start's replay, and a start that waits for a live preparation.
	ss := w.seedSavedSearch(seedOpts{items: []string{"a"}})
	w.start(ss.ID, "replayed", nil)
	w.start(ss.ID, "replayed", nil)
	plane := idempotency.NewService(pool, idempotency.Config{})
	held, err := plane.Claim(ctx, w.org, idempotency.ScopeSavedSearchStart, "held", "h", idempotency.SavedSearchStartLease)
	if err != nil || held.Kind != idempotency.KindClaimed {
		t.Fatalf("holding a preparation: %v, %v", held.Kind, err)
	}
	hub := idempotency.NewHub(pool.Config().ConnConfig, nil)
	hctx, stop := context.WithCancel(ctx)
	go func() { _ = hub.Run(hctx) }()
	t.Cleanup(stop)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = plane.Complete(ctx, held.Claim, idempotency.Completion{Response: json.RawMessage(`{"done":true}`)})
	}()
	if out, err := plane.ClaimWait(ctx, hub, w.org, idempotency.ScopeSavedSearchStart, "held", "h",
		idempotency.SavedSearchStartLease, 10*time.Second); err != nil || out.Kind != idempotency.KindCompleted {
		t.Fatalf("ClaimWait = %v, %v; want completed", out.Kind, err)
	}
	// Callbacks of every ending: accepted, duplicate, hash_mismatch,
	// unknown_job, job_mismatch.
	for _, d := range []delivery{
		{jobID: pathOf(w.job), deliveryID: "d-1", body: callbackBody(w.job.ProviderJobID, "running", nil)},
		{jobID: pathOf(w.job), deliveryID: "d-1", body: callbackBody(w.job.ProviderJobID, "running", nil)},
		{jobID: pathOf(w.job), deliveryID: "d-1", body: callbackBody(w.job.ProviderJobID, "failed", nil)},
		{jobID: pathOf(w.job), deliveryID: "d-2", body: callbackBody("nobody's", "running", nil)},
		{jobID: uuid.NewString(), deliveryID: "d-3", body: callbackBody(w.job.ProviderJobID, "running", nil)},
	} {
		if res := w.callback(d); res.status != http.StatusOK {
			t.Fatalf("callback = %d %s", res.status, res.body)
		}
	}
	// Tool calls through the journal: a call, its replay.
	runner := tools.NewRunner(plane, tools.Config{})
	call := tools.Call{OrganizationID: w.org, RunID: w.runID, Spec: tools.ToolSpec{Name: "router.send", Timeout: time.Second},
		Tool: echoTool{}, Input: json.RawMessage(`{"to":"x"}`), Occurrence: 1, ToolCallID: "c-1"}
	for range 2 {
		if res, err := runner.Execute(ctx, call, tools.AllowAll); err != nil || !res.OK {
			t.Fatalf("tool call = %+v, %v", res, err)
		}
	}

	statements := log.distinct()
	if len(statements) < 20 {
		t.Fatalf("recorded %d distinct statements; the recording is broken", len(statements))
	}
	routed := 0
	for _, s := range statements {
		tasks, subplans, err := explainTasks(ctx, pool, s)
		if err != nil {
			t.Errorf("EXPLAIN %s: %v", oneLine(s.sql), err)
			continue
		}
		switch {
		case subplans > 0:
			t.Errorf("planned in %d steps (distributed subplans), not routed to one shard:\n%s", subplans+1, oneLine(s.sql))
		case slices.ContainsFunc(tasks, func(n int) bool { return n != 1 }):
			t.Errorf("sent to %v shards, not routed to one:\n%s", tasks, oneLine(s.sql))
		case len(tasks) > 0:
			routed++
		}
	}
	if routed < 15 {
		t.Errorf("%d of %d statements read a distributed table; the request path cannot be that small", routed, len(statements))
	}
	t.Logf("%d distinct statements, %d routed to one shard, %d on the coordinator alone", len(statements), routed, len(statements)-routed)
}

// explainTasks EXPLAINs s with its arguments and returns the task count of
// every Citus scan in the plan and the number of distributed subplans.
// BEGIN, COMMIT and the like cannot be EXPLAINed and plan nothing.
func explainTasks(ctx context.Context, pool *pgxpool.Pool, s statement) (tasks []int, subplans int, err error) {
	word := strings.ToLower(strings.Fields(s.sql)[0])
	switch word {
	case "begin", "commit", "rollback", "listen", "unlisten", "set", "savepoint", "release":
		return nil, 0, nil
	}
	var doc string
	if err := pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+s.sql, s.args...).Scan(&doc); err != nil {
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

// echoTool answers every call with its input.
type echoTool struct{}

func (echoTool) Call(_ context.Context, _ tools.CallContext, input json.RawMessage) (tools.Result, error) {
	return tools.Result{OK: true, Outcome: tools.OutcomeOK, Message: fmt.Sprintf("sent %s", input)}, nil
}
