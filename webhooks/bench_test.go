package webhooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/internal/outbound"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/pgtest/benchkit"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/webhooks"
)

// TestEventsBench measures the delivery of Run events to a local endpoint
// (an HTTP server in the process that answers 204 at once), on a durable
// PostgreSQL, at the worker's defaults (16 in flight, lease passes of up
// to 100): the time one Worker takes to deliver a backlog of N events (N
// admitted Runs, one endpoint), as events per second. The baseline,
// measured in the same rounds, is the same bodies signed and POSTed to
// the same endpoint with the same concurrency and no outbox. Rounds
// alternate the two, the backlog reset between them (untimed). It prints
// PostgreSQL's settings, the statements and round trips per event, each
// round, medians and the ratio. A measurement, not a timed assertion:
//
//	SEARCHD_BENCH=1 go test -run TestEventsBench -v ./webhooks/
//
// SEARCHD_BENCH_RUNS (default 2000) and SEARCHD_BENCH_ROUNDS (default 5)
// size it.
func TestEventsBench(t *testing.T) {
	benchkit.Asked(t)
	n := benchkit.Int("SEARCHD_BENCH_RUNS", 2000)
	rounds := benchkit.Int("SEARCHD_BENCH_ROUNDS", 5)
	ctx := context.Background()
	dbURL := pgtest.NewDurableDBURL(t)
	tr := &pgtest.Tracer{}
	pool := benchkit.Pool{MaxConns: 16, Tracer: tr}.Open(t, dbURL)
	admin := benchkit.Pool{}.Open(t, dbURL)
	fmt.Printf("\nRun events to a local endpoint: the webhooks Worker against bare signed POSTs of the same bodies\n")
	fmt.Printf("database    %s\n", pgtest.DurableSettings(t))
	fmt.Printf("load        load average %s; %d rounds of %d events per system, alternating, first system rotating\n", benchkit.LoadAverage(), rounds, n)
	fmt.Printf("worker      its defaults: concurrency %d, batch %d, timeout %s\n", outbound.DefaultConcurrency, outbound.DefaultBatch, outbound.DefaultTimeout)

	var (
		mu       sync.Mutex
		received int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		mu.Lock()
		received++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	org := uuid.New()
	hooks := webhooks.NewStore(pool, webhooks.Config{AllowHTTPLoopback: true})
	ep, err := webhooks.NewStore(admin, webhooks.Config{AllowHTTPLoopback: true}).Create(ctx, org,
		webhooks.CreateParams{URL: srv.URL, Actor: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	store := runs.NewStore(admin, runs.Config{})
	name := "enrich.company"
	for i := range n {
		if _, _, err := store.Admit(ctx, runs.AdmitParams{OrganizationID: org, Kind: runs.KindCapability,
			StartKey: runs.DirectStartKey(fmt.Sprintf("bench-%d", i)), RequestHash: "h", Name: &name,
			Input: json.RawMessage(fmt.Sprintf(`{"domain":"example-%d.com"}`, i)), Actor: "bench"}); err != nil {
			t.Fatal(err)
		}
	}
	reset := func() {
		for _, q := range []string{
			`DELETE FROM agent.webhook_delivery_attempts WHERE organization_id = $1`,
			`UPDATE agent.webhook_deliveries SET state = 'pending', attempts = 0, next_attempt_at = now(), delivered_at = NULL,
				last_attempt_at = NULL, last_status_code = NULL, last_error = NULL WHERE organization_id = $1`,
		} {
			if _, err := admin.Exec(ctx, q, org); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := admin.Exec(ctx, `VACUUM ANALYZE agent.webhook_deliveries, agent.webhook_delivery_attempts`); err != nil {
			t.Fatal(err)
		}
	}
	// The baseline's bodies and ids: the very messages the worker sends.
	reset()
	leased, err := hooks.LeasePass(ctx, n, time.Minute)
	if err != nil || len(leased) != n {
		t.Fatalf("leased %d of %d: %v", len(leased), n, err)
	}
	var ids []string
	var bodies [][]byte
	for _, l := range leased {
		b, err := webhooks.Body(l)
		if err != nil {
			t.Fatal(err)
		}
		ids, bodies = append(ids, webhooks.MessageID(l.RunID, l.Seq)), append(bodies, b)
	}

	searchd := func() (time.Duration, pgtest.Counts) {
		w, err := webhooks.NewWorker(hooks, webhooks.WorkerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		before := tr.Counts()
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		began := time.Now()
		go func() {
			defer close(done)
			_ = w.Run(rctx)
		}()
		var took time.Duration
		for {
			var pending int
			if err := admin.QueryRow(ctx, `SELECT count(*) FROM agent.webhook_deliveries WHERE organization_id = $1 AND state <> 'delivered'`, org).Scan(&pending); err != nil {
				t.Fatal(err)
			}
			if pending == 0 {
				took = time.Since(began)
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		cancel()
		<-done
		return took, tr.Counts().Sub(before)
	}
	wh, _ := standardwebhooks.NewWebhook(ep.Secret)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: outbound.DefaultConcurrency}}
	bare := func() time.Duration {
		began := time.Now()
		var wg sync.WaitGroup
		work := make(chan int)
		for range outbound.DefaultConcurrency {
			wg.Go(func() {
				for i := range work {
					now := time.Now()
					sig, _ := wh.Sign(ids[i], now, bodies[i])
					req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(bodies[i]))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("webhook-id", ids[i])
					req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
					req.Header.Set("webhook-signature", sig)
					res, err := client.Do(req)
					if err != nil {
						t.Error(err)
						continue
					}
					var buf bytes.Buffer
					_, _ = buf.ReadFrom(res.Body)
					res.Body.Close()
				}
			})
		}
		for i := range ids {
			work <- i
		}
		close(work)
		wg.Wait()
		return time.Since(began)
	}

	rates := map[string][]float64{}
	var counts pgtest.Counts
	for r := range rounds {
		line := fmt.Sprintf("round %d:", r+1)
		for j := range 2 {
			switch (j + r) % 2 {
			case 0:
				reset()
				took, c := searchd()
				counts = counts.Add(c)
				rate := float64(n) / took.Seconds()
				rates["searchd"] = append(rates["searchd"], rate)
				line += fmt.Sprintf("  searchd %6.0f/s", rate)
			case 1:
				took := bare()
				rate := float64(n) / took.Seconds()
				rates["bare"] = append(rates["bare"], rate)
				line += fmt.Sprintf("  bare POSTs %6.0f/s", rate)
			}
		}
		fmt.Println(line)
	}
	delivered := float64(n * rounds)
	paired := make([]float64, rounds)
	for i := range paired {
		paired[i] = rates["searchd"][i] / rates["bare"][i]
	}
	fmt.Printf("\nmedians of %d rounds: searchd %.0f events/s (%.0f–%.0f), bare POSTs %.0f/s (%.0f–%.0f): ratio %.2f× [rounds %.2f–%.2f]\n",
		rounds, benchkit.Median(rates["searchd"]), slices.Min(rates["searchd"]), slices.Max(rates["searchd"]),
		benchkit.Median(rates["bare"]), slices.Min(rates["bare"]), slices.Max(rates["bare"]),
		benchkit.Median(rates["searchd"])/benchkit.Median(rates["bare"]), slices.Min(paired), slices.Max(paired))
	fmt.Printf("per event: %.2f statements in %.2f round trips (the attempt's record with its clock read, and a share of a lease pass)\n",
		float64(counts.Statements)/delivered, float64(counts.RoundTrips)/delivered)
	fmt.Printf("load average after: %s\n", benchkit.LoadAverage())
	if received < n*rounds*2 {
		t.Errorf("the endpoint received %d deliveries, want at least %d", received, n*rounds*2)
	}
}
