//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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
	"github.com/searchd/searchd/console/consoletest"
	"github.com/searchd/searchd/sessions"
)

// memoryCeiling is the most resident memory one searchd process may reach
// under the attacks of TestMemoryStaysBounded (docs/testing.md states it).
const memoryCeiling = 256 << 20

// TestMemoryStaysBounded runs one real `searchd serve` process, at its
// default settings, against a database holding what the attacks of issue
// 14 need (a hundred 1 MiB snapshots of one saved search, Runs with 2 MiB
// inputs and saved searches with 1 MiB filters written before the limits
// existed), and runs each attack for a few seconds from many goroutines:
// the snapshot list, the Run list, the saved-search list, whole snapshots,
// the console's heaviest pages (a compare of two baselines of 10000 items,
// a saved search and a snapshot of as many, the lists and a Run over those
// records; consoletest.SeedLarge), bodies at the 4 MiB limit from a tenant
// and from strangers, and /readyz floods. A
// well-behaved client of another organization starts and reads all the
// while. The process's peak resident memory (VmHWM) must stay under
// memoryCeiling, and every request of the well-behaved client must succeed.
//
// The unsigned 8 MiB callback attack has a test of its own,
// TestCallbackFloodMemory (callback_flood_test.go), under the same ceiling.
func TestMemoryStaysBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := workDir(t, "searchd-e2e-memory-")
	bin, pg := standalone(ctx, t, dir, startPostgres)
	db, err := pgxpool.New(ctx, pg.URL(dbName)+"&pool_max_conns=4")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	attacker, neighbour := uuid.New(), uuid.New()
	target, victim := seedAttacks(ctx, t, db, attacker, neighbour)
	large, err := consoletest.SeedLarge(ctx, db, attacker)
	if err != nil {
		t.Fatal(err)
	}

	r, err := newReplica("searchd-memory", bin, pg.TCPAddr(), dir, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Kill()
	pid := r.proc.Pid()
	t.Logf("searchd pid %d: VmHWM %d KiB after start", pid, peakRSS(t, pid)>>10)

	token := func(org uuid.UUID) string {
		tok, err := auth.SignToken([]byte(jwtSecret), org, "memory", time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	attackAuth, goodAuth := token(attacker), token(neighbour)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	// The console's session: the attacker's own, made in the database as
	// a sign-in makes it (serve at its defaults has no token sign-in).
	console := consoleSession(ctx, t, db, attacker)
	get := func(path string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+path, nil)
		if err != nil {
			return 0, err
		}
		req.AddCookie(console)
		res, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusServiceUnavailable {
			return res.StatusCode, fmt.Errorf("GET %s = %d", path, res.StatusCode)
		}
		return res.StatusCode, nil
	}
	send := func(method, path, auth string, body []byte) (int, error) {
		var rd io.Reader
		if body != nil {
			rd = io.MultiReader(bytes.NewReader(body)) // no length known: chunked
		}
		req, err := http.NewRequestWithContext(ctx, method, r.URL()+path, rd)
		if err != nil {
			return 0, err
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Idempotency-Key", uuid.NewString())
		res, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, nil
	}
	// A body just under the default limit, read whole and decoded before
	// its filters are refused; sent chunked, so the server cannot refuse
	// it by its Content-Length and must read it.
	big := append(append([]byte(`{"name":"n","brief":{"query":"q","filters":{"s":"`), bytes.Repeat([]byte("x"), api.DefaultMaxBodyBytes-64)...), []byte(`"}}}`)...)

	var bloat strings.Builder
	for i := range 110_000 {
		fmt.Fprintf(&bloat, "X%x: v\r\n", i)
	}

	attacks := []struct {
		name    string
		workers int
		do      func() (int, error)
	}{
		{"snapshot list, 100 snapshots of 1 MiB", 32, func() (int, error) {
			return send(http.MethodGet, "/v1/saved-searches/"+target.String()+"/snapshots?limit=200", attackAuth, nil)
		}},
		{"Run list, inputs of 2 MiB", 32, func() (int, error) { return send(http.MethodGet, "/v1/runs?limit=200", attackAuth, nil) }},
		{"saved-search list, filters of 1 MiB", 32, func() (int, error) {
			return send(http.MethodGet, "/v1/saved-searches?limit=200", attackAuth, nil)
		}},
		{"whole 1 MiB snapshots", 32, func() (int, error) {
			return send(http.MethodGet, "/v1/saved-searches/"+target.String(), attackAuth, nil)
		}},
		{"starts of a 1 MiB saved search", 32, func() (int, error) {
			return send(http.MethodPost, "/v1/saved-searches/"+target.String()+"/start", attackAuth, nil)
		}},
		// The console's heaviest pages, on the records of
		// consoletest.SeedLarge and the ones above: each is bounded in
		// bytes (console.MaxPageBytes) and read without whole baselines,
		// inputs or results.
		{"console: compare, 10000 items each way", 32, func() (int, error) {
			return get(fmt.Sprintf("/console/saved-searches/%s/compare?a=%s&b=%s", large.Search, large.Older, large.Newer))
		}},
		{"console: saved search, 10000 items", 32, func() (int, error) { return get("/console/saved-searches/" + large.Search.String()) }},
		{"console: snapshot of 2000 items of 1000 chars", 32, func() (int, error) { return get("/console/snapshots/" + large.Unbounded.String()) }},
		{"console: saved-search list, filters of 1 MiB", 32, func() (int, error) { return get("/console/saved-searches") }},
		{"console: Run list, inputs of 2 MiB", 32, func() (int, error) { return get("/console/runs") }},
		{"console: a Run of 2 MiB input, its job", 32, func() (int, error) {
			if status, err := get("/console/runs/" + large.Run.String()); err != nil {
				return status, err
			}
			return get("/console/provider-jobs/" + large.Job.String())
		}},
		{"4 MiB bodies from a tenant, chunked", 64, func() (int, error) { return send(http.MethodPost, "/v1/saved-searches", attackAuth, big) }},
		{"4 MiB bodies from strangers, chunked", 64, func() (int, error) { return send(http.MethodPost, "/v1/saved-searches", "", big) }},
		{"/readyz flood", 128, func() (int, error) { return send(http.MethodGet, "/readyz", "", nil) }},
		// Issue 36: a stranger's 1 MiB header of short fields of distinct
		// names, on a new connection each time; 1,131 MiB at 64
		// connections when serve kept Go's default limit of 1 MiB.
		{"1 MiB headers of short fields, 64 connections", 64, func() (int, error) { return headerAttack(r.addr, &bloat) }},
	}
	const attackFor = 3 * time.Second
	for _, a := range attacks {
		resetPeakRSS(t, pid)
		var (
			stop            atomic.Bool
			wg              sync.WaitGroup
			attempts, fives atomic.Int64
			refused         atomic.Int64
			refusedErr      atomic.Value
			goodOK, goodBad atomic.Int64
			goodErr         atomic.Value
		)
		for range a.workers {
			wg.Go(func() {
				for !stop.Load() {
					status, err := a.do()
					attempts.Add(1)
					switch {
					case err == nil && status >= 500 && status != http.StatusServiceUnavailable:
						fives.Add(1)
					case err != nil && status != 0:
						// A console page that answered neither 200 nor 503.
						refused.Add(1)
						refusedErr.Store(err.Error())
					}
				}
			})
		}
		// The well-behaved neighbour: a start, its replay, a read.
		wg.Go(func() {
			for !stop.Load() {
				key := uuid.NewString()
				for _, step := range []struct {
					method, path string
					want         int
				}{
					{http.MethodPost, "/v1/saved-searches/" + victim.String() + "/start", http.StatusCreated},
					{http.MethodGet, "/v1/saved-searches/" + victim.String(), http.StatusOK},
					{http.MethodGet, "/v1/runs?limit=20", http.StatusOK},
				} {
					req, _ := http.NewRequestWithContext(ctx, step.method, r.URL()+step.path, nil)
					req.Header.Set("Authorization", goodAuth)
					req.Header.Set("Idempotency-Key", key)
					res, err := hc.Do(req)
					if err != nil {
						goodBad.Add(1)
						goodErr.Store(err.Error())
						continue
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != step.want {
						goodBad.Add(1)
						goodErr.Store(fmt.Sprintf("%s %s = %d", step.method, step.path, res.StatusCode))
						continue
					}
					goodOK.Add(1)
				}
			}
		})
		time.Sleep(attackFor)
		stop.Store(true)
		wg.Wait()
		peak := peakRSS(t, pid)
		t.Logf("%-40s %6d requests, neighbour %4d ok %d failed; VmHWM %d MiB (ceiling %d MiB)",
			a.name, attempts.Load(), goodOK.Load(), goodBad.Load(), peak>>20, memoryCeiling>>20)
		if peak > memoryCeiling {
			t.Errorf("%s: peak resident memory %d MiB, over the ceiling of %d MiB", a.name, peak>>20, memoryCeiling>>20)
		}
		if goodBad.Load() > 0 || goodOK.Load() == 0 {
			t.Errorf("%s: the well-behaved neighbour had %d failures (last: %v) and %d successes; want none and some",
				a.name, goodBad.Load(), goodErr.Load(), goodOK.Load())
		}
		if fives.Load() > 0 {
			t.Errorf("%s: %d answers were 5xx other than 503", a.name, fives.Load())
		}
		if refused.Load() > 0 {
			t.Errorf("%s: %d console pages were not served (last: %v)", a.name, refused.Load(), refusedErr.Load())
		}
	}
}

// consoleSession makes a console session for a person of org, as a
// sign-in would, and returns its cookie.
func consoleSession(ctx context.Context, t *testing.T, db *pgxpool.Pool, org uuid.UUID) *http.Cookie {
	t.Helper()
	secret, _, err := sessions.NewStore(db, nil).Create(ctx, sessions.CreateParams{
		OrganizationID: org, Actor: "memory", Via: sessions.ViaToken, Lifetime: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &http.Cookie{Name: "searchd_console", Value: secret}
}

// seedAttacks writes what the attacks read, straight into the database as
// a database from before the limits may hold it: in org attacker a saved
// search whose baseline is 1 MiB with a hundred snapshots of it, 40 Runs
// with 2 MiB inputs and 50 saved searches with 1 MiB filters; in
// neighbour a small saved search. It returns both saved searches' ids.
func seedAttacks(ctx context.Context, t *testing.T, db *pgxpool.Pool, attacker, neighbour uuid.UUID) (target, victim uuid.UUID) {
	t.Helper()
	target, victim = uuid.New(), uuid.New()
	began := time.Now()
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO agent.saved_searches (id, organization_id, name, brief, created_at, updated_at)
			VALUES ($1, $2, 'target', '{"query":"q"}', now(), now()), ($3, $4, 'victim', '{"query":"q"}', now(), now())`,
			[]any{target, attacker, victim, neighbour}},
		{`INSERT INTO agent.saved_search_baselines (saved_search_id, organization_id, items, updated_at)
			VALUES ($1, $2, array_fill(repeat('i', 120), ARRAY[8500]), now()), ($3, $4, '{a,b}', now())`, []any{target, attacker, victim, neighbour}},
		{`INSERT INTO agent.saved_search_snapshots (id, organization_id, saved_search_id, saved_search_version,
				saved_search_name, brief, baseline, content_hash, created_at)
			SELECT gen_random_uuid(), $1, $2, 1, 'target', '{"query":"q"}', b.doc, md5(i::text) || md5(i::text), now()
			FROM generate_series(1, 100) i,
				(SELECT jsonb_build_object('items', to_jsonb(array_fill(repeat('i', 120), ARRAY[8500])), 'cursor', null) AS doc) b`,
			[]any{attacker, target}},
		{`INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, name, input, created_at, retain_until)
			SELECT gen_random_uuid(), $1, 'capability', 'direct:seed-' || i, 'h', 'c', d.doc, now(), now() + interval '1 day'
			FROM generate_series(1, 40) i, (SELECT jsonb_build_object('s', repeat('x', 2 << 20)) AS doc) d`,
			[]any{attacker}},
		{`WITH s AS (
				INSERT INTO agent.saved_searches (id, organization_id, name, brief, created_at, updated_at)
				SELECT gen_random_uuid(), $1, 'fat ' || i, jsonb_build_object('query', 'q', 'filters', jsonb_build_object('s', repeat('f', 1 << 20))), now(), now()
				FROM generate_series(1, 50) i RETURNING id)
			INSERT INTO agent.saved_search_baselines (saved_search_id, organization_id, updated_at) SELECT id, $1, now() FROM s`,
			[]any{attacker}},
	} {
		if _, err := db.Exec(ctx, stmt.sql, stmt.args...); err != nil {
			t.Fatalf("seeding: %v\n%s", err, stmt.sql)
		}
	}
	t.Logf("seeded the attacks' data in %s", time.Since(began).Round(time.Millisecond))
	return target, victim
}

// resetPeakRSS sets the peak resident set size of pid to its current one
// (clear_refs 5), so each attack's peak is its own.
func resetPeakRSS(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
}

// peakRSS returns the peak resident set size of process pid (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/pid/status")
	return 0
}

// headerAttack sends GET /healthz with the header fields on a new
// connection and returns the status of the answer. The server may answer
// (431) and close before it has read them all: the write goes on beside
// the read.
func headerAttack(addr string, fields *strings.Builder) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	go func() { _, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n"+fields.String()+"\r\n") }()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}
