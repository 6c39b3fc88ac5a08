package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
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

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/internal/pgcluster"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/testkit/pgtest/benchkit"
	"github.com/searchd/searchd/internal/testkit/seatqtest"
	"github.com/searchd/searchd/migrations"
	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/sessions"
	"github.com/searchd/searchd/sweeper"
)

// TestFairnessBench measures what one organization hammering the server
// costs another, at the defaults a user gets: searchd serve's pool of 16
// (DefaultDBMaxConns) with its 15 s statement timeout, and the admission
// queue at its defaults (seats the pool's size, seatq.DefaultQueueLength
// per flow, seatq.DefaultMaxWait), shared by the API and the console as
// cmd/searchd shares it, on a durable PostgreSQL of its own (fsync,
// synchronous_commit and full_page_writes on). It prints every limit
// setting first.
//
// A light organization makes sequential new starts (one client, a fresh
// Idempotency-Key each, 201 expected). Each round has three phases: the
// light organization alone; beside a heavy organization whose clients
// hammer the API (lists of 200 saved searches, Runs and snapshots, and
// new starts of saved searches with 2000-item baselines, round robin);
// and beside the same clients reading the console's largest page (a saved
// search with its 2000-item baseline and its snapshot timeline). The
// heavy clients ignore Retry-After: a 429 is retried at once. It prints,
// per phase, the median over the rounds of the light organization's p50
// and p99 and their ratio to alone, the light organization's 429s
// (target 0), and the heavy organization's 2xx per second and share of
// its answers that were 2xx.
//
//	SEARCHD_BENCH=1 go test -run '^TestFairnessBench$' -v ./api/
//
// SEARCHD_BENCH_ROUNDS (3), SEARCHD_BENCH_SECONDS (4, per phase) and
// SEARCHD_BENCH_HAMMERS (32 heavy clients) size it. SEARCHD_BENCH_SEATS
// changes the seats from the default (the pool's size), to compare; the
// output then says so.
func TestFairnessBench(t *testing.T) {
	benchkit.Asked(t)
	var (
		rounds  = benchkit.Int("SEARCHD_BENCH_ROUNDS", 3)
		phase   = time.Duration(benchkit.Int("SEARCHD_BENCH_SECONDS", 4)) * time.Second
		hammers = benchkit.Int("SEARCHD_BENCH_HAMMERS", 32)
		seats   = benchkit.Int("SEARCHD_BENCH_SEATS", 0)
		ctx     = context.Background()
	)
	const poolSize = 16 // cmd/searchd's DefaultDBMaxConns
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

	// The heavy organization: 200 saved searches, each with a 2000-item
	// baseline, so its starts copy 100 KB and its pages are large.
	heavyOrg, lightOrg := uuid.New(), uuid.New()
	store := savedsearch.NewStore(admin)
	var heavySearches []uuid.UUID
	for i := range 200 {
		items := make([]string, 2000)
		for j := range items {
			items[j] = fmt.Sprintf("https://example.com/results/%d/%d", i, j)
		}
		ss, err := store.Create(ctx, heavyOrg, savedsearch.CreateParams{Name: fmt.Sprintf("heavy %d", i),
			Brief: savedsearch.Brief{Query: "everything"}, Baseline: savedsearch.Baseline{Items: items}})
		if err != nil {
			t.Fatal(err)
		}
		heavySearches = append(heavySearches, ss.ID)
	}
	lightSearch, err := store.Create(ctx, lightOrg, savedsearch.CreateParams{Name: "light",
		Brief: savedsearch.Brief{Query: "one thing"}, Baseline: savedsearch.Baseline{Items: []string{"a", "b"}}})
	if err != nil {
		t.Fatal(err)
	}

	// The server as cmd/searchd builds it: one pool, one seat queue
	// at its defaults for the API and the console, the console mounted
	// beside the API.
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.MaxConns = poolSize
	pcfg.ConnConfig.RuntimeParams["statement_timeout"] = "15000"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	seatsNote := "(the pool's size)"
	if seats == 0 {
		seats = poolSize
	} else {
		seatsNote = "(CHANGED by SEARCHD_BENCH_SEATS, to compare with the default, the pool's size)"
	}
	queue := seatqtest.New(t, seatq.Config{Seats: seats})
	st := newStores(pool, nil)
	d := st.deps(t, providerjobs.Config{})
	d.Plane, d.Logger, d.Seats = st.plane, slog.New(slog.DiscardHandler), queue
	srv, err := api.New(d)
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Deps{
		SavedSearches: st.searches, Snapshots: st.snapshots, Runs: st.runs,
		JobAudit: providerjobs.NewAudit(pool), Operator: operator.NewStore(pool, nil),
		SweeperRuns: sweeper.NewRunLog(pool, sweeper.ViaServe, nil, nil), Dispatches: st.dispatches,
		Sessions: sessions.NewStore(pool, nil), TokenSignIn: true, Verifier: testVerifier(t, nil),
		Logger: slog.New(slog.DiscardHandler), Seats: queue,
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(con.Mount(srv.Handler()))
	defer ts.Close()
	base := ts.URL

	token := func(org uuid.UUID) string {
		tok, err := auth.SignToken(testSecret, org, "bench", time.Now(), 2*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	heavyTok, lightAuth := token(heavyOrg), "Bearer "+token(lightOrg)
	heavyAuth := "Bearer " + heavyTok
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(method, path, auth, cookie, key string) (int, error) {
		r, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			return 0, err
		}
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: "searchd_console", Value: cookie})
		}
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
	// Runs and snapshots for the heavy lists and the console's timeline.
	for i := range 400 {
		if _, err := call(http.MethodPost, "/v1/saved-searches/"+heavySearches[i%10].String()+"/start",
			heavyAuth, "", "seed-"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	// The console's session: the heavy organization's token as a cookie.
	res, err := client.PostForm(base+"/console/sign-in", url.Values{"token": {heavyTok}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var session string
	for _, c := range res.Cookies() {
		if c.Name == "searchd_console" {
			session = c.Value
		}
	}
	if res.StatusCode != http.StatusSeeOther || session == "" {
		t.Fatalf("console sign-in = %d, session cookie %q", res.StatusCode, session)
	}
	consolePage := "/console/saved-searches/" + heavySearches[0].String()
	if status, err := call(http.MethodGet, consolePage, "", session, ""); err != nil || status != http.StatusOK {
		t.Fatalf("GET %s = %d, %v", consolePage, status, err)
	}

	var keySeq atomic.Int64
	type heavyCount struct{ ok, refused, other atomic.Int64 }
	// hammer runs clients until stop closes, on the API or the console.
	hammer := func(door string, stop <-chan struct{}, n *heavyCount, wg *sync.WaitGroup) {
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
					switch {
					case door == "console":
						status, err = call(http.MethodGet, consolePage, "", session, "")
					case i%4 == 0:
						status, err = call(http.MethodGet, "/v1/saved-searches?limit=200", heavyAuth, "", "")
					case i%4 == 1:
						status, err = call(http.MethodGet, "/v1/runs?limit=200", heavyAuth, "", "")
					case i%4 == 2:
						status, err = call(http.MethodGet, "/v1/saved-searches/"+heavySearches[i%10].String()+"/snapshots?limit=200", heavyAuth, "", "")
					default:
						status, err = call(http.MethodPost, "/v1/saved-searches/"+heavySearches[i%200].String()+"/start",
							heavyAuth, "", "h-"+strconv.FormatInt(keySeq.Add(1), 10))
					}
					switch {
					case err != nil:
						t.Error(err)
						return
					case status >= 200 && status < 300:
						n.ok.Add(1)
					case status == http.StatusTooManyRequests:
						n.refused.Add(1) // Retry-After ignored: again at once
					default:
						n.other.Add(1)
					}
				}
			})
		}
	}
	// light makes sequential new starts for d; it returns their latencies
	// and how many answered 429.
	light := func(d time.Duration) (lat []time.Duration, refused int) {
		path := "/v1/saved-searches/" + lightSearch.ID.String() + "/start"
		for end := time.Now().Add(d); time.Now().Before(end); {
			began := time.Now()
			status, err := call(http.MethodPost, path, lightAuth, "", "l-"+strconv.FormatInt(keySeq.Add(1), 10))
			took := time.Since(began)
			switch {
			case err != nil:
				t.Fatal(err)
			case status == http.StatusTooManyRequests:
				refused++
			case status != http.StatusCreated:
				t.Fatalf("light start = %d, want 201", status)
			default:
				lat = append(lat, took)
			}
		}
		return lat, refused
	}
	type phaseResult struct {
		p50, p99     []float64
		lightRefused int
		heavy        heavyCount
		seconds      float64
	}
	phases := []string{"alone", "api", "console"}
	results := map[string]*phaseResult{}
	for _, name := range phases {
		results[name] = &phaseResult{}
	}
	for r := range rounds {
		for _, name := range phases {
			res := results[name]
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if name != "alone" {
				hammer(name, stop, &res.heavy, &wg)
				time.Sleep(300 * time.Millisecond) // let the heavy clients fill the seats
			}
			lat, refused := light(phase)
			close(stop)
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			res.p50 = append(res.p50, ms(quantile(lat, 0.50)))
			res.p99 = append(res.p99, ms(quantile(lat, 0.99)))
			res.lightRefused += refused
			res.seconds += (phase + 300*time.Millisecond).Seconds()
			t.Logf("round %d %-8s: light p50 %.1f ms, p99 %.1f ms (%d starts, %d refused)",
				r+1, name, ms(quantile(lat, 0.50)), ms(quantile(lat, 0.99)), len(lat), refused)
		}
	}
	med := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	fmt.Printf("\nfairness: limits: seats %d %s, queue length %d per flow, max wait %s "+
		"(seatq's defaults, as searchd serve); pool %d (DefaultDBMaxConns), statement_timeout 15s; nothing else changed\n",
		queue.Seats(), seatsNote, queue.QueueLength(), queue.MaxWait(), poolSize)
	fmt.Printf("fairness: %d rounds of %s per phase; light: 1 client, sequential new starts; heavy: %d clients ignoring Retry-After "+
		"(API: lists of 200 and starts of 2000-item saved searches; console: its saved-search page, 2000 items and the timeline); GOMAXPROCS %d\n",
		rounds, phase, hammers, runtime.GOMAXPROCS(0))
	fmt.Printf("fairness: database %s\n", settings)
	fmt.Printf("| heavy door | light p50 | ratio | light p99 | ratio | light 429s | heavy 2xx/s | heavy 2xx share | target |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|\n")
	alone := results["alone"]
	for _, name := range phases {
		res := results[name]
		p50, p99 := med(res.p50), med(res.p99)
		heavy := "—"
		share := "—"
		if name != "alone" {
			ok, all := res.heavy.ok.Load(), res.heavy.ok.Load()+res.heavy.refused.Load()+res.heavy.other.Load()
			heavy = fmt.Sprintf("%.0f", float64(ok)/res.seconds)
			share = fmt.Sprintf("%.1f%% (%d 429, %d other)", 100*float64(ok)/float64(max(all, 1)), res.heavy.refused.Load(), res.heavy.other.Load())
		}
		fmt.Printf("| %s | %.1f ms | %.2f× | %.1f ms | %.2f× | %d | %s | %s | light 0 × 429 |\n",
			map[string]string{"alone": "none (alone)", "api": "API", "console": "console"}[name],
			p50, p50/med(alone.p50), p99, p99/med(alone.p99), res.lightRefused, heavy, share)
	}
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
