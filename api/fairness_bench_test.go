package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/pgcluster"
	"github.com/searchd/searchd/internal/readiness"
	"github.com/searchd/searchd/migrations"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/savedsearch"
)

// TestFairnessBench measures what one organization hammering lists and
// starts costs another organization: the victim's p99 latency of a new
// start and of a replay, alone and beside the hammer, on a durable
// PostgreSQL (fsync, synchronous_commit and full_page_writes on, a cluster
// of its own). The server is built as cmd/searchd builds it: a pool of 16
// (DefaultDBMaxConns) with a 5 s statement timeout. It runs the hammer
// three times: against the server's limits at their defaults (the
// per-organization cap for that pool, 4, and the heaviest organization
// giving way while the processors are saturated, budget
// DefaultMaxInFlight), against the cap alone, and with neither, so each
// part is visible. Rounds alternate the four phases; it prints the
// medians of each phase's p99 and their ratios to alone (target: at most
// 2x with the limits).
//
//	SEARCHD_BENCH=1 go test -run TestFairnessBench -v ./api/
//
// SEARCHD_BENCH_ROUNDS (5), SEARCHD_BENCH_SECONDS (4, per phase),
// SEARCHD_BENCH_HAMMERS (16 hammer clients), SEARCHD_BENCH_VICTIMS (2
// victim clients), SEARCHD_BENCH_ORG_CAP (the cap under test, default
// DefaultOrgMaxInFlight) and SEARCHD_BENCH_BUDGET (default
// DefaultMaxInFlight()) size it. A hammer client that meets 429 retries after
// 10 ms, ignoring Retry-After, as an impatient client would.
func TestFairnessBench(t *testing.T) {
	if os.Getenv("SEARCHD_BENCH") == "" {
		t.Skip("a benchmark: set SEARCHD_BENCH=1 to run it")
	}
	var (
		rounds  = benchEnv("SEARCHD_BENCH_ROUNDS", 5)
		phase   = time.Duration(benchEnv("SEARCHD_BENCH_SECONDS", 4)) * time.Second
		hammers = benchEnv("SEARCHD_BENCH_HAMMERS", 16)
		victims = benchEnv("SEARCHD_BENCH_VICTIMS", 2)
		orgCap  = benchEnv("SEARCHD_BENCH_ORG_CAP", api.DefaultOrgMaxInFlight)
		budget  = benchEnv("SEARCHD_BENCH_BUDGET", api.DefaultMaxInFlight())
		ctx     = context.Background()
	)
	dir, err := os.MkdirTemp("", "searchd-fairness-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cluster, err := pgcluster.Start(ctx, pgcluster.Config{Dir: dir, Settings: map[string]string{
		"max_connections": "100", "fsync": "on", "synchronous_commit": "on", "full_page_writes": "on",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	if _, err := cluster.CreateDatabase(ctx, "bench"); err != nil {
		t.Fatal(err)
	}
	dbURL := cluster.URL("bench")
	if _, err := migrations.Up(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	admin, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var settings string
	if err := admin.QueryRow(ctx, `SELECT concat_ws(' ', 'fsync=' || current_setting('fsync'),
		'synchronous_commit=' || current_setting('synchronous_commit'),
		'full_page_writes=' || current_setting('full_page_writes'),
		'shared_buffers=' || current_setting('shared_buffers'), split_part(version(), ' ', 2))`).Scan(&settings); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(settings, "fsync=on synchronous_commit=on full_page_writes=on") {
		t.Fatalf("the cluster is not durable: %s", settings)
	}

	// The hammer's organization: 200 saved searches, each with a 2000-item
	// baseline, so its starts copy 100 KB and its lists are full pages.
	hammerOrg, victimOrg := uuid.New(), uuid.New()
	store := savedsearch.NewStore(admin)
	var hammerSearches []uuid.UUID
	for i := range 200 {
		items := make([]string, 2000)
		for j := range items {
			items[j] = fmt.Sprintf("https://example.com/results/%d/%d", i, j)
		}
		ss, err := store.Create(ctx, hammerOrg, savedsearch.CreateParams{Name: fmt.Sprintf("hammer %d", i),
			Brief: savedsearch.Brief{Query: "everything"}, Baseline: savedsearch.Baseline{Items: items}})
		if err != nil {
			t.Fatal(err)
		}
		hammerSearches = append(hammerSearches, ss.ID)
	}
	victimSearch, err := store.Create(ctx, victimOrg, savedsearch.CreateParams{Name: "victim",
		Brief: savedsearch.Brief{Query: "one thing"}, Baseline: savedsearch.Baseline{Items: []string{"a", "b"}}})
	if err != nil {
		t.Fatal(err)
	}

	newServer := func(orgMax, budget int) (string, func()) {
		cfg, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 16
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = "5000"
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		st := newStores(pool, nil)
		srv, err := api.New(api.Deps{
			Ready: readiness.Pool(pool), Plane: st.plane, SavedSearches: st.searches, Snapshots: st.snapshots,
			Runs: st.runs, Starter: st.starter(t, admission.Config{}),
			ProviderJobs: providerjobs.New(pool, st.plane, providerjobs.Config{}),
			Verifier:     testVerifier(t, nil), Logger: slog.New(slog.DiscardHandler), OrgMaxInFlight: orgMax, MaxInFlight: budget,
		})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv.Handler())
		return ts.URL, func() { ts.Close(); pool.Close() }
	}
	// The server as cmd/searchd builds it (the cap and the fair share of
	// the budget), one with the cap alone, and one with neither.
	servers := map[string]string{}
	for name, limits := range map[string][2]int{"shared": {orgCap, budget}, "capped": {orgCap, 1 << 20}, "uncapped": {1 << 20, 1 << 20}} {
		url, closeServer := newServer(limits[0], limits[1])
		defer closeServer()
		servers[name] = url
	}
	capped := servers["shared"]

	token := func(org uuid.UUID) string {
		tok, err := auth.SignToken(testSecret, org, "bench", time.Now(), 2*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	hammerAuth, victimAuth := token(hammerOrg), token(victimOrg)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	call := func(method, url, auth, key string) (int, error) {
		r, err := http.NewRequest(method, url, nil)
		if err != nil {
			return 0, err
		}
		r.Header.Set("Authorization", auth)
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		res, err := client.Do(r)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, nil
	}
	// Runs and snapshots for the hammer's lists to page through.
	for i := range 400 {
		if _, err := call(http.MethodPost, capped+"/v1/saved-searches/"+hammerSearches[i%10].String()+"/start",
			hammerAuth, "seed-"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}

	var keySeq atomic.Int64
	// hammer runs clients against base until stop closes: lists of every
	// kind at the largest page, and new starts, round robin.
	hammer := func(base string, stop <-chan struct{}, limited *atomic.Int64, wg *sync.WaitGroup) {
		for c := range hammers {
			wg.Go(func() {
				for i := c; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					var status int
					var err error
					switch i % 4 {
					case 0:
						status, err = call(http.MethodGet, base+"/v1/saved-searches?limit=200", hammerAuth, "")
					case 1:
						status, err = call(http.MethodGet, base+"/v1/runs?limit=200", hammerAuth, "")
					case 2:
						status, err = call(http.MethodGet, base+"/v1/saved-searches/"+hammerSearches[i%10].String()+"/snapshots?limit=200", hammerAuth, "")
					default:
						status, err = call(http.MethodPost, base+"/v1/saved-searches/"+hammerSearches[i%200].String()+"/start",
							hammerAuth, "h-"+strconv.FormatInt(keySeq.Add(1), 10))
					}
					if err != nil {
						t.Error(err)
						return
					}
					if status == http.StatusTooManyRequests {
						limited.Add(1)
						time.Sleep(10 * time.Millisecond)
					}
				}
			})
		}
	}
	// victim measures new starts and replays of its own organization for d.
	victim := func(base string, d time.Duration) (starts, replays []time.Duration) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		for range victims {
			wg.Go(func() {
				for time.Now().Before(end) {
					key := "v-" + strconv.FormatInt(keySeq.Add(1), 10)
					url := base + "/v1/saved-searches/" + victimSearch.ID.String() + "/start"
					for i, want := range []int{http.StatusCreated, http.StatusOK} {
						began := time.Now()
						status, err := call(http.MethodPost, url, victimAuth, key)
						took := time.Since(began)
						if err != nil || status != want {
							t.Errorf("victim start %d = %d, %v; want %d", i, status, err, want)
							return
						}
						mu.Lock()
						if i == 0 {
							starts = append(starts, took)
						} else {
							replays = append(replays, took)
						}
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		return starts, replays
	}
	type phaseResult struct{ start, replay []float64 }
	phases := []string{"alone", "shared", "capped", "uncapped"}
	results := map[string]*phaseResult{}
	limited := map[string]*atomic.Int64{}
	for _, name := range phases {
		results[name], limited[name] = &phaseResult{}, &atomic.Int64{}
	}
	for r := range rounds {
		for _, name := range phases {
			base, limited := servers[name], limited[name]
			if name == "alone" {
				base = servers["shared"]
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if name != "alone" {
				hammer(base, stop, limited, &wg)
				time.Sleep(300 * time.Millisecond) // let the hammer fill the pool
			}
			starts, replays := victim(base, phase)
			close(stop)
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			res := results[name]
			res.start = append(res.start, ms(p99(starts)))
			res.replay = append(res.replay, ms(p99(replays)))
			t.Logf("round %d %-8s: start p99 %.1f ms (%d), replay p99 %.1f ms (%d)",
				r+1, name, ms(p99(starts)), len(starts), ms(p99(replays)), len(replays))
		}
	}
	med := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	alone := results["alone"]
	fmt.Printf("\nfairness: %d rounds of %s per phase, %d hammer clients (lists of 200 and starts of a 2000-item saved search), %d victim clients, pool 16, org cap %d, budget %d, GOMAXPROCS %d\n",
		rounds, phase, hammers, victims, orgCap, budget, runtime.GOMAXPROCS(0))
	fmt.Printf("fairness: database %s\n", settings)
	fmt.Printf("| victim p99 (median of rounds) | alone | hammer, cap %d + fair share of %d | ratio | hammer, cap %d only | ratio | hammer, no limits | ratio | target |\n", orgCap, budget, orgCap)
	fmt.Printf("|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range []struct {
		name string
		get  func(*phaseResult) []float64
	}{
		{"new start", func(p *phaseResult) []float64 { return p.start }},
		{"replay", func(p *phaseResult) []float64 { return p.replay }},
	} {
		a, sh, c, u := med(m.get(alone)), med(m.get(results["shared"])), med(m.get(results["capped"])), med(m.get(results["uncapped"]))
		fmt.Printf("| %s | %.1f ms | %.1f ms | %.2f× | %.1f ms | %.2f× | %.1f ms | %.2f× | ≤ 2× with the limits |\n", m.name, a, sh, sh/a, c, c/a, u, u/a)
	}
	fmt.Printf("fairness: hammer requests refused 429: %d with cap and share, %d with the cap only, %d without\n",
		limited["shared"].Load(), limited["capped"].Load(), limited["uncapped"].Load())
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
