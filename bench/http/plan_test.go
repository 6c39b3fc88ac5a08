package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The plan bench/http prints before the replay rounds is the start-key
// lookup on analyzed tables (see env.analyze): with an organization's
// thousands of Runs, analyzed, the generic plan is the unique index, not a
// scan of the organization's Runs.
func TestReplayPlanIsTheStartKeyLookup(t *testing.T) {
	t.Parallel()
	e := &env{admin: pgtest.NewDB(t), org: uuid.New()}
	ctx := context.Background()
	_, err := e.admin.Exec(ctx, `INSERT INTO agent.runs
		(id, organization_id, kind, start_key, request_hash, name, status, options, input, created_by, created_at, retain_until)
		SELECT gen_random_uuid(), $1, 'capability', 'direct:key-' || i, 'hash', 'run', 'queued', '{}', '{}', 'bench', now(), now() + interval '1 day'
		FROM generate_series(1, 5000) AS i`, e.org)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.analyze(ctx); err != nil {
		t.Fatal(err)
	}
	plan, err := e.replayPlan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "runs_org_start_key_key") {
		t.Errorf("replayPlan() = %q, want an index scan of runs_org_start_key_key", plan)
	}
	// The session is left as it was: the name is free again.
	if _, err := e.replayPlan(ctx); err != nil {
		t.Errorf("replayPlan() a second time: %v", err)
	}
}
