package dispatch_test

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

	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/internal/outbound"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/pgtest/benchkit"
	"github.com/searchd/searchd/runs"
)

// TestDispatchBench measures dispatch throughput to a local runtime (an
// HTTP server in the process that answers 202 at once), on a durable
// PostgreSQL, at the dispatcher's defaults (16 deliveries in flight, lease
// passes of up to 100): the time one Dispatcher takes to deliver a backlog
// of N admitted Runs, as deliveries per second. The baseline, measured in
// the same rounds, is the floor of the same deliveries: the same bodies
// signed and POSTed to the same runtime with the same concurrency, and no
// outbox at all (no lease, no message read, no answer recorded). The ratio
// is what the outbox's bookkeeping leaves of the bare HTTP rate. Rounds
// alternate the two, the backlog reset between them (untimed). It prints
// PostgreSQL's settings, the statements and round trips per delivery, each
// round, medians and the ratio. A measurement, not a timed assertion:
//
//	SEARCHD_BENCH=1 go test -run TestDispatchBench -v ./dispatch/
//
// SEARCHD_BENCH_RUNS (default 2000) and SEARCHD_BENCH_ROUNDS (default 5)
// size it.
func TestDispatchBench(t *testing.T) {
	benchkit.Asked(t)
	n := benchkit.Int("SEARCHD_BENCH_RUNS", 2000)
	rounds := benchkit.Int("SEARCHD_BENCH_ROUNDS", 5)
	ctx := context.Background()
	dbURL := pgtest.NewDurableDBURL(t)
	tr := &pgtest.Tracer{}
	pool := benchkit.Pool{MaxConns: 16, Tracer: tr}.Open(t, dbURL) // searchd's default pool
	// admin seeds, resets and polls, untraced: the tracer counts the
	// dispatcher's statements alone.
	admin := benchkit.Pool{}.Open(t, dbURL)
	fmt.Printf("\ndispatch throughput to a local runtime: the Dispatcher against bare signed POSTs of the same bodies\n")
	fmt.Printf("database    %s\n", pgtest.DurableSettings(t))
	fmt.Printf("load        load average %s; %d rounds of %d Runs per system, alternating, first system rotating\n", benchkit.LoadAverage(), rounds, n)
	fmt.Printf("dispatcher  its defaults: concurrency %d, batch %d, timeout %s\n", outbound.DefaultConcurrency, outbound.DefaultBatch, outbound.DefaultTimeout)

	store := runs.NewStore(admin, runs.Config{})
	org := uuid.New()
	name := "enrich.company"
	for i := range n {
		if _, _, err := store.Admit(ctx, runs.AdmitParams{OrganizationID: org, Kind: runs.KindCapability,
			StartKey: runs.DirectStartKey(fmt.Sprintf("bench-%d", i)), RequestHash: "h", Name: &name,
			Input: json.RawMessage(fmt.Sprintf(`{"domain":"example-%d.com","depth":2}`, i)), Actor: "bench"}); err != nil {
			t.Fatal(err)
		}
	}
	outbox := dispatch.NewStore(pool, nil)
	// The baseline's bodies: the very messages the dispatcher sends.
	var ids []uuid.UUID
	var bodies [][]byte
	rows, err := admin.Query(ctx, `SELECT id FROM agent.runs WHERE organization_id = $1`, org)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		b, err := outbox.Message(ctx, org, id)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}

	var (
		mu       sync.Mutex
		received int
	)
	rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		mu.Lock()
		received++
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer rt.Close()

	reset := func() {
		for _, q := range []string{
			`DELETE FROM agent.run_status_changes WHERE organization_id = $1`,
			`DELETE FROM agent.run_dispatch_attempts WHERE organization_id = $1`,
			`UPDATE agent.runs SET status = 'queued', version = 1, updated_at = NULL WHERE organization_id = $1`,
			`UPDATE agent.run_dispatches SET state = 'pending', attempts = 0, next_attempt_at = now(), dispatched_at = NULL,
				last_attempt_at = NULL, last_status_code = NULL, last_error = NULL WHERE organization_id = $1`,
		} {
			if _, err := admin.Exec(ctx, q, org); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := admin.Exec(ctx, `VACUUM ANALYZE agent.run_dispatches, agent.run_dispatch_attempts, agent.runs`); err != nil {
			t.Fatal(err)
		}
	}
	searchd := func() (time.Duration, pgtest.Counts) {
		d, err := dispatch.NewDispatcher(outbox, dispatch.Config{URL: rt.URL, Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		before := tr.Counts()
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		began := time.Now()
		go func() {
			defer close(done)
			_ = d.Run(rctx)
		}()
		var took time.Duration
		for {
			var pending int
			if err := admin.QueryRow(ctx, `SELECT count(*) FROM agent.run_dispatches WHERE organization_id = $1 AND state <> 'dispatched'`, org).Scan(&pending); err != nil {
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
	wh, _ := standardwebhooks.NewWebhookRaw(secret)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: outbound.DefaultConcurrency}}
	bare := func() time.Duration {
		began := time.Now()
		var wg sync.WaitGroup
		work := make(chan int)
		for range outbound.DefaultConcurrency {
			wg.Go(func() {
				for i := range work {
					id := ids[i].String()
					now := time.Now()
					sig, _ := wh.Sign(id, now, bodies[i])
					req, _ := http.NewRequest(http.MethodPost, rt.URL, bytes.NewReader(bodies[i]))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("webhook-id", id)
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

	var rates = map[string][]float64{}
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
	fmt.Printf("\nmedians of %d rounds: searchd %.0f deliveries/s (%.0f–%.0f), bare POSTs %.0f/s (%.0f–%.0f): ratio %.2f× [rounds %.2f–%.2f]\n",
		rounds, benchkit.Median(rates["searchd"]), slices.Min(rates["searchd"]), slices.Max(rates["searchd"]),
		benchkit.Median(rates["bare"]), slices.Min(rates["bare"]), slices.Max(rates["bare"]),
		benchkit.Median(rates["searchd"])/benchkit.Median(rates["bare"]), slices.Min(paired), slices.Max(paired))
	fmt.Printf("per delivery: %.2f statements in %.2f round trips, each its own transaction: the message read, the answer's "+
		"record (a commit, so a WAL flush) and a share of a lease pass (also a commit)\n",
		float64(counts.Statements)/delivered, float64(counts.RoundTrips)/delivered)
	fmt.Printf("load average after: %s\n", benchkit.LoadAverage())
	if received < n*rounds*2 {
		t.Errorf("the runtime received %d deliveries, want at least %d", received, n*rounds*2)
	}
}
