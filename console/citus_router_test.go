package console_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// TestEveryAuditorPageIsRoutedToOneShard is issue 25.2 for the console: on
// a Citus cluster (make test-citus) every statement an organization's
// auditor's page sends is a router query to that organization's shard
// group (pgtest.StatementLog.WantRouted), as the API's are. It visits every auditor
// page of the seeded world, each list with its filters and its next page,
// as organization A. The operator's views read across organizations by
// design (the whole plane's counts, stuck claims of every organization)
// and are not held to it; the session's own statements read the local
// sessions table on the coordinator.
func TestEveryAuditorPageIsRoutedToOneShard(t *testing.T) {
	if !pgtest.Citus() {
		t.Skip("runs on a Citus cluster: make test-citus")
	}
	t.Parallel()
	ctx := context.Background()
	seedPool, w := seeded(t)
	log := &pgtest.StatementLog{}
	cfg := seedPool.Config()
	cfg.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var out bytes.Buffer
	b := &bundle{pool: pool, world: w, handler: newConsoleAt(t, pool, &out, 0, nil), log: &out}
	cookie := b.signIn(t, w.OrgA, "alice")
	for _, target := range []string{
		"/console/saved-searches",
		"/console/saved-searches?archived=1",
		"/console/saved-searches?limit=1",
		"/console/saved-searches/" + w.Search.String(),
		"/console/saved-searches/" + w.Scheduled.String(),
		"/console/saved-searches/" + w.Search.String() + "/compare?a=" + w.FirstSnapshot.String() + "&b=" + w.SecondSnapshot.String(),
		"/console/snapshots/" + w.SecondSnapshot.String(),
		"/console/runs",
		"/console/runs?limit=1",
		"/console/runs?actor=alice",
		"/console/runs?key=" + w.SecondKey,
		"/console/runs/" + w.SecondRun.String(),
		"/console/runs/" + w.DirectRun.String(),
		"/console/provider-jobs",
		"/console/provider-jobs/" + w.Job.String(),
		"/console/schedules",
	} {
		if rec := b.do(http.MethodGet, target, cookie, nil, nil); rec.Code != http.StatusOK {
			t.Fatalf("GET %s = %d", target, rec.Code)
		}
	}
	log.WantRouted(t, pool, 10)
}
