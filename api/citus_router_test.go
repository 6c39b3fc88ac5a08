package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/tools"
)

// TestEveryRequestStatementIsRoutedToOneShard is issue 25.2: on a Citus
// cluster (make test-citus), every statement of the request path is a
// router query, planned to run on one shard (one shard group, for a
// join of co-located tables). It records every statement a server sends
// while it answers a valid request on every route of the API, twice (a
// replay), the starts' replays and Prefer: wait, provider callbacks of
// every ending, and tool calls through the journal of every ending (a
// replay, a release, uncertain calls a person resolves); then it asks the
// coordinator to EXPLAIN each with the arguments it was sent with, and
// fails for any Citus scan of more than one task, or any statement
// planned in several steps (a distributed subplan): StatementLog.WantRouted.
func TestEveryRequestStatementIsRoutedToOneShard(t *testing.T) {
	if !pgtest.Citus() {
		t.Skip("runs on a Citus cluster: make test-citus")
	}
	t.Parallel()
	log := &pgtest.StatementLog{}
	pool := pgtest.NewTracedDB(t, log)
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
	// The Run list's filters, each statement shape of them (issue 37.5):
	// a key's list reads its Runs in a CTE first.
	for _, q := range []string{"status=queued", "idempotency_key=replayed",
		"idempotency_key=replayed&status=queued&saved_search_id=" + ss.ID.String(),
		"saved_search_id=" + ss.ID.String() + "&created_after=2020-01-01T00:00:00Z&created_before=2999-01-01T00:00:00Z"} {
		if res := w.do(req{method: http.MethodGet, path: "/v1/runs?" + q}); res.status != http.StatusOK {
			t.Fatalf("GET /v1/runs?%s = %d %s", q, res.status, res.body)
		}
	}
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
	// Tool calls through the journal, as the agent runtime's Runner (module
	// toolrun, whose own Citus test routes its calls) makes them with the
	// plane's statements alone: a call and its replay, a retryable failure
	// (its claim released), and uncertain calls a person resolves, one
	// marked delivered, one authorized to retry.
	const toolScope = idempotency.ToolScopePrefix + "router.send"
	toolCall := func(key string, end func(*idempotency.Claim) (bool, error)) {
		t.Helper()
		if out, err := plane.Read(ctx, w.org, toolScope, key, "h"); err != nil || out.Kind != idempotency.KindAbsent {
			t.Fatalf("reading tool call %s = %v, %v; want absent", key, out.Kind, err)
		}
		out, err := plane.Claim(ctx, w.org, toolScope, key, "h", 16*time.Second)
		if err != nil || out.Kind != idempotency.KindClaimed {
			t.Fatalf("claiming tool call %s = %v, %v", key, out.Kind, err)
		}
		if ok, err := end(out.Claim); err != nil || !ok {
			t.Fatalf("ending tool call %s = %v, %v", key, ok, err)
		}
	}
	complete := func(res tools.Result) func(*idempotency.Claim) (bool, error) {
		return func(c *idempotency.Claim) (bool, error) {
			body, err := tools.EncodeAnswer(res)
			if err != nil {
				return false, err
			}
			return plane.Complete(ctx, c, idempotency.Completion{Response: body})
		}
	}
	toolCall("tk1_router_1", complete(tools.Result{OK: true, Outcome: tools.OutcomeOK, Message: `sent {"to":"x"}`}))
	if out, err := plane.Read(ctx, w.org, toolScope, "tk1_router_1", "h"); err != nil || out.Kind != idempotency.KindCompleted {
		t.Fatalf("replaying a tool call = %v, %v", out.Kind, err)
	}
	toolCall("tk1_router_2", func(c *idempotency.Claim) (bool, error) { return plane.Release(ctx, c) })
	resolver := tools.NewResolver(pool, tools.ResolverConfig{})
	for i, resolution := range []tools.Resolution{tools.ResolutionDelivered, tools.ResolutionRetry} {
		key := fmt.Sprintf("tk1_router_%d", 3+i)
		toolCall(key, complete(tools.Result{Outcome: tools.OutcomeUncertain, Message: "tool call uncertain (timeout)"}))
		if _, err := resolver.Resolve(ctx, tools.ResolveParams{OrganizationID: w.org, Scope: toolScope, Key: key,
			Resolution: resolution, Actor: "router", Reason: "checked at the vendor"}); err != nil {
			t.Fatalf("Resolve(%s) = %v", resolution, err)
		}
	}

	log.WantRouted(t, pool, 15)
}
