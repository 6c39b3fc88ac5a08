//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/client"
)

// TestScalingReplicas measures new saved-search starts per second through
// one, two and three replicas on one durable PostgreSQL server (fsync=on,
// synchronous_commit=on, full_page_writes=on), with the same clients spread
// over the replicas, in alternating rounds; it prints the medians and their
// ratio to one replica. It is a measurement, not a check, run when
// SEARCHD_E2E_SCALING=1 (docs/scaling.md quotes it). SEARCHD_E2E_CLIENTS
// sets the clients (default 24), SEARCHD_E2E_DURATION a round (default 6s,
// here cut to a third).
func TestScalingReplicas(t *testing.T) {
	if os.Getenv("SEARCHD_E2E_SCALING") != "1" {
		t.Skip("a measurement: set SEARCHD_E2E_SCALING=1")
	}
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()
	dir := workDir(t, "searchd-scaling-")
	bin, pg := standalone(ctx, t, dir, startDurable)
	var replicas []*replica
	defer func() {
		for _, r := range replicas {
			r.Kill()
		}
	}()
	for i := range 3 {
		r, err := newReplica(fmt.Sprintf("searchd-s%d", i+1), bin, pg.TCPAddr(), dir, cfg.lease)
		if err != nil {
			t.Fatal(err)
		}
		// One organization measured at full tilt, at the admission
		// queue's defaults (it queues, never caps, one organization alone).
		r.env = []string{"SEARCHD_LOG_LEVEL=error"}
		replicas = append(replicas, r)
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, pg.URL(dbName))
	if err != nil {
		t.Fatal(err)
	}
	var settings string
	err = conn.QueryRow(ctx, `SELECT 'fsync=' || current_setting('fsync') || ', synchronous_commit=' ||
		current_setting('synchronous_commit') || ', full_page_writes=' || current_setting('full_page_writes')`).Scan(&settings)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if settings != "fsync=on, synchronous_commit=on, full_page_writes=on" {
		t.Fatalf("the server runs with %s, want a durable one", settings)
	}
	h := &harness{cfg: cfg, dir: dir, pg: pg, replicas: replicas}
	s, err := newScenarioRun(t.Context(), t, h, "Scaling")
	if err != nil {
		t.Fatal(err)
	}

	round := max(cfg.duration/3, time.Second)
	const rounds = 5
	perN := map[int][]float64{}
	for r := range rounds {
		order := []int{1, 2, 3}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, n := range order {
			perN[n] = append(perN[n], startRate(t, s, replicas[:n], cfg.clients, round))
		}
	}
	base := medianRate(perN[1])
	for n := 1; n <= 3; n++ {
		m := medianRate(perN[n])
		t.Logf("%d replica(s), %d clients: new starts %.0f /s (median of %d rounds of %s: %.0f), %.2fx one replica",
			n, cfg.clients, m, rounds, round, perN[n], m/base)
	}
	t.Logf("PostgreSQL: one server on this machine, %s; %d CPUs shared by the server, the replicas and the clients", settings, runtime.NumCPU())
}

// startRate drives clients clients, spread over targets, each sending new
// starts (a fresh key every time, no retries) for d, and returns the 2xx
// answers per second.
func startRate(t *testing.T, s *scenarioRun, targets []*replica, clients int, d time.Duration) float64 {
	var ok atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for i := range clients {
		c, err := newClient(fmt.Sprintf("scale.%d", i), s.token, targets, i, client.RetryPolicy{MaxAttempts: 1}, &recorder{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for n := 0; time.Now().Before(stop); n++ {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				_, err := c.StartSavedSearch(ctx, s.searches[(i+n)%len(s.searches)], client.StartOptions{MaxResults: 10},
					client.WithIdempotencyKey(uuid.NewString()))
				cancel()
				if err == nil {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(ok.Load()) / d.Seconds()
}

func medianRate(xs []float64) float64 {
	ys := slices.Clone(xs)
	slices.Sort(ys)
	if len(ys) == 0 {
		return 0
	}
	return ys[len(ys)/2]
}

// startDurable starts a cluster of the suite's own that fsyncs, as a
// benchmark of commits must (the fault suite's servers do not).
func startDurable(ctx context.Context, parent string) (*postgres, error) {
	pg, err := startPostgres(ctx, parent)
	if err != nil {
		return nil, err
	}
	pg.Stop()
	// Later settings win: these override Start's fsync=off.
	pg.settings = []string{"fsync=on", "full_page_writes=on", "synchronous_commit=on"}
	if err := pg.Start(ctx); err != nil {
		return nil, err
	}
	return pg, nil
}
