package toolrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/toolrun"
	"github.com/searchd/searchd/tools"
)

// TestEveryToolCallStatementIsRoutedToOneShard is the Runner's part of the
// server's router check (api's TestEveryRequestStatementIsRoutedToOneShard,
// issue 25.2): on a Citus cluster (SEARCHD_TEST_CITUS=1) it records every
// statement of tool calls of every ending (a call, its replay, a release,
// uncertain calls a person resolves as delivered and as a retry) and fails
// for any that is not routed to one shard.
func TestEveryToolCallStatementIsRoutedToOneShard(t *testing.T) {
	if !pgtest.Citus() {
		t.Skip("runs on a Citus cluster: SEARCHD_TEST_CITUS=1")
	}
	t.Parallel()
	log := &pgtest.StatementLog{}
	pool := pgtest.NewTracedDB(t, log)
	ctx := context.Background()
	org := uuid.New()
	runner := toolrun.NewRunner(idempotency.NewService(pool, idempotency.Config{}), toolrun.Config{})
	call := toolrun.Call{OrganizationID: org, RunID: uuid.New(), Spec: toolrun.ToolSpec{Name: "router.send", Timeout: time.Second},
		Input: json.RawMessage(`{"to":"x"}`), Occurrence: 1, ToolCallID: "c-1",
		Tool: toolFunc(func(_ context.Context, _ toolrun.CallContext, input json.RawMessage) (toolrun.Result, error) {
			return toolrun.Result{OK: true, Message: fmt.Sprintf("sent %s", input)}, nil
		})}
	for range 2 {
		if res, err := runner.Execute(ctx, call, toolrun.AllowAll); err != nil || !res.OK {
			t.Fatalf("tool call = %+v, %v", res, err)
		}
	}
	fail := func(te *toolrun.ToolError) toolrun.Tool {
		return toolFunc(func(context.Context, toolrun.CallContext, json.RawMessage) (toolrun.Result, error) {
			return toolrun.Result{}, te
		})
	}
	call.Tool, call.Occurrence = fail(&toolrun.ToolError{Code: "busy", Retryable: true}), 2
	if _, err := runner.Execute(ctx, call, toolrun.AllowAll); err == nil {
		t.Fatal("a retryable failure answered no error")
	}
	resolver := tools.NewResolver(pool, tools.ResolverConfig{})
	for i, resolution := range []tools.Resolution{tools.ResolutionDelivered, tools.ResolutionRetry} {
		call.Tool, call.Occurrence = fail(&toolrun.ToolError{Code: "timeout", Uncertain: true}), 3+i
		if res, err := runner.Execute(ctx, call, toolrun.AllowAll); err != nil || !res.Uncertain() {
			t.Fatalf("uncertain tool call = %+v, %v", res, err)
		}
		key, err := toolrun.Key(call.RunID, call.Spec.Name, call.Input, call.Occurrence)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := resolver.Resolve(ctx, tools.ResolveParams{OrganizationID: org, Scope: call.Spec.Scope(), Key: key,
			Resolution: resolution, Actor: "router", Reason: "checked at the vendor"}); err != nil {
			t.Fatalf("Resolve(%s) = %v", resolution, err)
		}
	}

	log.WantRouted(t, pool, 5)
}
