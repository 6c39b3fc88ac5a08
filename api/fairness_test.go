package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/internal/readiness"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

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
	checker := readiness.NewChecker(pool.Config().ConnConfig, 50*time.Millisecond, nil)
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
		// 200 with the whole pool held proves the probe reads no pool
		// connection (one that did could not answer while conn is held);
		// the bound is generous so a busy machine does not trip it.
		if res := probe(cached); res.status != http.StatusOK || time.Since(began) > 5*time.Second {
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
