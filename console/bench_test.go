package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/console/consoletest"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/pgtest/benchkit"
)

// TestConsoleBench is the console's benchmark, not a timed test: it seeds
// 10,000 snapshots (with a Run each) of one saved search and 100,000
// claims across 100 organizations, then requests every page over loopback
// HTTP and prints the median, p95 and max per page, with the ratio of the
// median to the 100 ms budget and to a SELECT 1 round trip measured in the
// same run. It asserts nothing about time. Run it with make bench-console
// (SEARCHD_BENCH=1).
func TestConsoleBench(t *testing.T) {
	benchkit.Asked(t)
	ctx := context.Background()
	// On the durable server (fsync and synchronous_commit on, printed
	// below), not the tests' fast one.
	pool := benchkit.Pool{}.Open(t, pgtest.NewDurableDBURL(t))
	w, err := consoletest.Seed(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{pool: pool, world: w, handler: newConsoleAt(t, pool, io.Discard, 0, nil)}
	start := time.Now()
	for _, q := range []string{
		// 10,000 snapshots of org A's saved search over the last 7 days,
		// each with a baseline of 200 items, by three actors, and a Run on
		// each.
		`WITH s AS (
			INSERT INTO agent.saved_search_snapshots (id, organization_id, saved_search_id, saved_search_version,
				saved_search_name, brief, baseline, content_hash, created_by, created_at)
			SELECT gen_random_uuid(), $1, $2, 100 + g, 'Berlin PostgreSQL engineers',
				jsonb_build_object('query', 'senior PostgreSQL engineer', 'filters', jsonb_build_object('page', g)),
				jsonb_build_object('items', (SELECT jsonb_agg('https://jobs.example.com/postings/' || (g + i)) FROM generate_series(1, 200) i), 'cursor', NULL),
				encode(sha256(g::text::bytea), 'hex'), (ARRAY['alice', 'bob', 'carol'])[g % 3 + 1],
				now() - g * interval '1 minute'
			FROM generate_series(1, 10000) g
			RETURNING id, organization_id, saved_search_id, created_by, created_at)
		INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, saved_search_id, snapshot_id,
			name, status, created_by, created_at, retain_until)
		SELECT gen_random_uuid(), s.organization_id, 'saved_search', 'saved_search:bulk-' || s.id, 'h',
			s.saved_search_id, s.id, 'Berlin PostgreSQL engineers', 'succeeded', s.created_by, s.created_at,
			s.created_at + interval '396 days'
		FROM s`,
		// 100,000 claims of 100 organizations claimed over the last 24
		// hours: 90% completed (one in 600 of them, tool calls, uncertain),
		// 5% in flight, 5% stuck.
		`INSERT INTO agent.idempotency_keys (id, organization_id, scope, key, request_hash, status, lease_token,
			resource_type, resource_id, response, claimed_at, lease_expires_at, retain_until)
		SELECT gen_random_uuid(), ('00000000-0000-4000-8000-' || lpad((g % 100)::text, 12, '0'))::uuid,
			(ARRAY['tool.email.send', 'webhook.acme', 'surface.saved_search.start'])[g % 3 + 1], 'bulk-' || g, 'h',
			CASE WHEN g % 20 < 18 THEN 'completed' ELSE 'processing' END, gen_random_uuid(),
			NULL, NULL, CASE WHEN g % 600 = 0 THEN '{"ok":false,"outcome":"uncertain","message":"timeout after send"}'::jsonb
				WHEN g % 20 < 18 THEN '{"ok":true}'::jsonb END,
			now() - (g % 1440) * interval '1 minute',
			CASE WHEN g % 20 = 18 THEN now() + interval '10 minutes' ELSE now() - (g % 1440) * interval '1 minute' + interval '30 seconds' END,
			now() + interval '1 day'
		FROM generate_series(1, 100000) g`,
		// 10,000 drops of org A's job over the last 24 hours.
		`INSERT INTO agent.webhook_drops (id, provider, path_job_id, delivery_id, request_hash, reason, organization_id, received_at)
		SELECT gen_random_uuid(), 'acme', $3, 'bulk-' || g, encode(sha256(g::text::bytea), 'hex'),
			(ARRAY['duplicate', 'hash_mismatch'])[g % 2 + 1], $1, now() - (g % 1440) * interval '1 minute'
		FROM generate_series(1, 10000) g`,
		`ANALYZE`,
	} {
		var args []any
		switch {
		case strings.Contains(q, "$3"):
			q = strings.ReplaceAll(q, "$3", "$2")
			args = []any{w.OrgA, w.Job.String()}
		case strings.Contains(q, "$2"):
			args = []any{w.OrgA, w.Search}
		}
		if _, err := b.pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("seeding: %v", err)
		}
	}
	seeded := time.Since(start)
	var snaps, claims int
	_ = b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM agent.saved_search_snapshots), (SELECT count(*) FROM agent.idempotency_keys)`).Scan(&snaps, &claims)
	var fsync, syncCommit, version string
	_ = b.pool.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('server_version')`).Scan(&fsync, &syncCommit, &version)

	srv := httptest.NewServer(b.handler)
	defer srv.Close()
	// The same console keeping no copy of the plane's counts: every
	// request starts their read or joins the one running, and a page waits
	// for it at most the default OverviewWait.
	coldSrv := httptest.NewServer(newConsoleAt(t, b.pool, io.Discard, -1, nil, func(d *console.Deps) { d.OverviewWait = 0 }))
	defer coldSrv.Close()
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	org := b.signIn(t, w.OrgA, "alice")
	op := b.operatorSignIn(t)
	// A deep page of the timeline: its cursor from page 100.
	deep := b.cursorAfter(t, org, "/console/saved-searches/"+w.Search.String(), 100)

	pages := []struct {
		name, path, cookie string
		cold               bool
	}{
		{"sign-in (no database)", "/console/sign-in", "", false},
		{"saved searches", "/console/saved-searches?archived=1", org, false},
		{"saved search + timeline", "/console/saved-searches/" + w.Search.String(), org, false},
		{"timeline page 101", "/console/saved-searches/" + w.Search.String() + "?cursor=" + deep, org, false},
		{"timeline by actor", "/console/saved-searches/" + w.Search.String() + "?actor=carol", org, false},
		{"timeline by time", "/console/saved-searches/" + w.Search.String() + "?from=2020-01-01&to=" + time.Now().Add(-72*time.Hour).UTC().Format("2006-01-02T15:04"), org, false},
		{"compare", "/console/saved-searches/" + w.Search.String() + "/compare?a=" + w.FirstSnapshot.String() + "&b=" + w.SecondSnapshot.String(), org, false},
		{"snapshot + its Runs", "/console/snapshots/" + w.SecondSnapshot.String(), org, false},
		{"runs", "/console/runs", org, false},
		{"runs by key", "/console/runs?key=" + w.SecondKey, org, false},
		{"runs by actor", "/console/runs?actor=bob", org, false},
		{"run", "/console/runs/" + w.SecondRun.String(), org, false},
		{"provider jobs", "/console/provider-jobs", org, false},
		{"provider job (10,000 drops)", "/console/provider-jobs/" + w.Job.String(), org, false},
		{"operator: claims", "/console/operator/claims", op, false},
		{"operator: claims, no copy", "/console/operator/claims", op, true},
		// Not a page: what console.js fetches while a page shows the counts
		// as being counted. It waits for the read: the scan's own time.
		{"  (counts read, fragment)", "/console/operator/claims/counts", op, true},
		{"operator: claims by scope", "/console/operator/claims?scope=tool.email.send", op, false},
		{"operator: claims by key", "/console/operator/claims?org=00000000-0000-4000-8000-000000000099&scope=tool.email.send&key=bulk-99", op, false},
		{"operator: inbound", "/console/operator/inbound", op, false},
		{"operator: uncertain effects", "/console/operator/uncertain", op, false},
		{"operator: releases", "/console/operator/releases", op, false},
		{"operator: sweeper", "/console/operator/sweeper", op, false},
	}
	const warm, rounds = 3, 30
	baseline := measure(rounds, func() {
		var one int
		_ = b.pool.QueryRow(ctx, "SELECT 1").Scan(&one)
	})
	fmt.Printf("\nconsole pages on %d snapshots and %d claims (seeded in %s); PostgreSQL %s, fsync=%s, synchronous_commit=%s\n",
		snaps, claims, seeded.Round(time.Millisecond), version, fsync, syncCommit)
	fmt.Printf("%d requests per page over loopback HTTP after %d warm-ups; baseline SELECT 1 round trip: median %s\n\n",
		rounds, warm, fmtDur(baseline[len(baseline)/2]))
	fmt.Printf("load average before: %s\n", benchkit.LoadAverage())
	fmt.Printf("%-30s %9s %9s %9s %10s %10s\n", "page", "median", "p95", "max", "/100ms", "/SELECT 1")
	worst := time.Duration(0)
	for _, p := range pages {
		get := func() {
			base := srv.URL
			if p.cold {
				base = coldSrv.URL
			}
			req, _ := http.NewRequest("GET", base+p.path, nil)
			if p.cookie != "" {
				req.AddCookie(&http.Cookie{Name: "searchd_console", Value: p.cookie})
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s = %d", p.path, resp.StatusCode)
			}
		}
		for range warm {
			get()
		}
		d := measure(rounds, get)
		med, p95, mx := d[len(d)/2], d[len(d)*95/100], d[len(d)-1]
		if !strings.HasSuffix(p.path, "/counts") { // not a page
			worst = max(worst, med)
		}
		fmt.Printf("%-30s %9s %9s %9s %9.2fx %9.1fx\n", p.name, fmtDur(med), fmtDur(p95), fmtDur(mx),
			float64(med)/float64(100*time.Millisecond), float64(med)/float64(baseline[len(baseline)/2]))
	}
	fmt.Printf("load average after: %s\n", benchkit.LoadAverage())
	fmt.Printf("\nslowest page's median %s: %.2fx the 100 ms budget\n", fmtDur(worst), float64(worst)/float64(100*time.Millisecond))
}

// measure runs f n times and returns the sorted durations.
func measure(n int, f func()) []time.Duration {
	d := make([]time.Duration, n)
	for i := range d {
		s := time.Now()
		f()
		d[i] = time.Since(s)
	}
	slices.Sort(d)
	return d
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// cursorAfter follows a list's "Older" link n times and returns the cursor
// of the page it reaches.
func (b *bundle) cursorAfter(t *testing.T, cookie, path string, n int) string {
	t.Helper()
	target := path
	cursor := ""
	for range n {
		body := b.do("GET", target, cookie, nil, nil).Body.String()
		i := strings.Index(body, `class="next"`)
		if i < 0 {
			t.Fatalf("no next page after %s", target)
		}
		href := body[strings.LastIndex(body[:i], `href="`)+6 : i-2]
		href = strings.ReplaceAll(href, "&amp;", "&")
		cursor = href[strings.Index(href, "cursor=")+7:]
		target = href
	}
	return cursor
}
