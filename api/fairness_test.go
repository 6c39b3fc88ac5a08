package api_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/internal/pgtest"
	"github.com/searchd/searchd/internal/readiness"
	"github.com/searchd/searchd/savedsearch"
)

// TestOneOrganizationAtItsCapGets429AndOthersAreServed holds two requests
// of one organization in flight (each PATCH waits on a row lock the test
// holds), with a cap of two: the organization's third request must answer
// 429 rate_limited with Retry-After and be counted, while another
// organization's requests keep being served; once the two end, the first
// organization is served again.
func TestOneOrganizationAtItsCapGets429AndOthersAreServed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{deps: func(d *api.Deps) { d.OrgMaxInFlight = 2 }})
	ss := b.seedSavedSearch(seedOpts{})
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM agent.saved_searches WHERE organization_id = $1 AND id = $2 FOR UPDATE`, b.org, ss.ID); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	held := make([]*response, 2)
	for i := range held {
		wg.Go(func() {
			res, err := b.send(req{method: http.MethodPatch, path: "/v1/saved-searches/" + ss.ID.String(),
				body: map[string]any{"name": "held"}})
			if err != nil {
				t.Error(err)
			}
			held[i] = res
		})
	}
	// Wait until both PATCHes wait on the lock.
	deadline := time.Now().Add(10 * time.Second)
	for b.lockWaits() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the two PATCHes never waited on the row lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches"})
	if p := res.problem(t); res.status != http.StatusTooManyRequests || p.Code != api.CodeRateLimited || res.header.Get("Retry-After") != "1" {
		t.Errorf("third request at the cap = %d %s Retry-After %q, want 429 rate_limited with Retry-After 1",
			res.status, res.body, res.header.Get("Retry-After"))
	}
	other := b.tokenFor(mustUUID(t), "neighbour")
	for range 3 {
		res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches", header: map[string]string{"Authorization": "Bearer " + other}})
		if res.status != http.StatusOK {
			t.Errorf("another organization while the first is at its cap = %d %s, want 200", res.status, res.body)
		}
	}
	metrics := b.do(req{method: http.MethodGet, path: "/metrics", noAuth: true})
	if !strings.Contains(string(metrics.body), `searchd_http_rate_limited_total{route="/v1/saved-searches"} 1`) {
		t.Errorf("metrics lack the refused request:\n%s", grepLines(string(metrics.body), "rate_limited"))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, r := range held {
		if r == nil || r.status != http.StatusOK {
			t.Errorf("held PATCH %d = %+v, want 200 once the lock went", i, r)
		}
	}
	if res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches"}); res.status != http.StatusOK {
		t.Errorf("after its requests ended = %d %s, want 200", res.status, res.body)
	}
}

// TestReadyzFromTheCheckerCostsThePoolNothing takes every connection of a
// one-connection request pool and probes /readyz: answered from the
// background checker, on its own connection, it must stay 200 and fast.
// The control is the per-probe check on the pool, which cannot answer.
func TestReadyzFromTheCheckerCostsThePoolNothing(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDBURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	checker := readiness.NewChecker(pool.Config().ConnConfig, 50*time.Millisecond)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); checker.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	cached := setup(t, setupOpts{pool: pool, deps: func(d *api.Deps) { d.Ready = checker.Ready }})
	perProbe := setup(t, setupOpts{pool: pool})
	probe := func(b *bundle) *response { return b.do(req{method: http.MethodGet, path: "/readyz", noAuth: true}) }

	deadline := time.Now().Add(10 * time.Second)
	for probe(cached).status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the checker never reported ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := pool.Acquire(ctx) // the whole request pool
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for range 50 {
		began := time.Now()
		if res := probe(cached); res.status != http.StatusOK || time.Since(began) > time.Second {
			t.Fatalf("/readyz with the pool taken = %d in %s, want 200 at once", res.status, time.Since(began))
		}
	}
	if res := probe(perProbe); res.status != http.StatusServiceUnavailable {
		t.Errorf("control: the per-probe check with the pool taken = %d, want 503", res.status)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func mustUUID(t *testing.T) uuid.UUID {
	t.Helper()
	return uuid.New()
}

// TestTheHeaviestOrganizationGivesWayWhenTheServerIsBusy holds requests in
// flight on row locks (PATCHes waiting for a lock the test holds): two of a
// heavy organization and one of a light one, with a budget of three, a cap
// of ten, and the processors taken for saturated. At the budget, the heavy
// organization's next request must answer 429 rate_limited (it has the
// most in flight, and the light one leaves it two), while the light
// organization's next request is served; once the light one's request
// ends the heavy one is alone again and served up to its cap. The control
// is the same moment with the processors keeping up: the heavy
// organization is served.
func TestTheHeaviestOrganizationGivesWayWhenTheServerIsBusy(t *testing.T) {
	t.Parallel()
	for _, saturated := range []bool{true, false} {
		b := setup(t, setupOpts{deps: func(d *api.Deps) { d.OrgMaxInFlight = 10; d.MaxInFlight = 3 }})
		api.SetProcessorsSaturated(b.api, func() bool { return saturated })
		ctx := context.Background()
		light := uuid.New()
		lightAuth := map[string]string{"Authorization": "Bearer " + b.tokenFor(light, "light")}
		heavySearch, lightSearch := b.seedSavedSearch(seedOpts{}), b.seedSavedSearch(seedOpts{org: light})
		// One transaction per organization: a cluster locks rows in a
		// statement routed to one shard.
		var locks []pgx.Tx
		for _, ss := range []*savedsearch.SavedSearch{heavySearch, lightSearch} {
			tx, err := b.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) // a failed check must not leave the PATCHes waiting
			if _, err := tx.Exec(ctx, `SELECT 1 FROM agent.saved_searches WHERE organization_id = $1 AND id = $2 FOR UPDATE`,
				ss.OrganizationID, ss.ID); err != nil {
				t.Fatal(err)
			}
			locks = append(locks, tx)
		}
		var wg sync.WaitGroup
		hold := func(id uuid.UUID, header map[string]string) {
			wg.Go(func() {
				res, err := b.send(req{method: http.MethodPatch, path: "/v1/saved-searches/" + id.String(),
					body: map[string]any{"name": "held"}, header: header})
				if err != nil || res.status != http.StatusOK {
					t.Errorf("held PATCH = %+v, %v; want 200 once the lock goes", res, err)
				}
			})
		}
		hold(heavySearch.ID, nil)
		hold(heavySearch.ID, nil)
		hold(lightSearch.ID, lightAuth)
		deadline := time.Now().Add(10 * time.Second)
		for b.lockWaits() < 3 {
			if time.Now().After(deadline) {
				t.Fatal("the three PATCHes never waited on the row lock")
			}
			time.Sleep(10 * time.Millisecond)
		}
		heavy := b.do(req{method: http.MethodGet, path: "/v1/saved-searches"})
		if saturated {
			if heavy.status != http.StatusTooManyRequests {
				t.Errorf("the heaviest organization at the budget = %d %s, want 429", heavy.status, heavy.body)
			} else if p := heavy.problem(t); p.Code != api.CodeRateLimited ||
				heavy.header.Get("Retry-After") != "1" || !strings.Contains(p.Detail, "busy") {
				t.Errorf("the heaviest organization at the budget = %d %s, want 429 rate_limited (busy) with Retry-After 1", heavy.status, heavy.body)
			}
		} else if heavy.status != http.StatusOK {
			t.Errorf("control, processors keeping up: the heavy organization = %d %s, want 200", heavy.status, heavy.body)
		}
		if res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches", header: lightAuth}); res.status != http.StatusOK {
			t.Errorf("the light organization at the budget = %d %s, want 200", res.status, res.body)
		}
		for _, tx := range locks {
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		for range 3 {
			if res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches"}); res.status != http.StatusOK {
				t.Errorf("the heavy organization alone again = %d %s, want 200", res.status, res.body)
			}
		}
	}
}
