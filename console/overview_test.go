package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/idempotency"
)

// inFlightTile reads the "in flight" count the claims page shows.
var inFlightTile = regexp.MustCompile(`<div class="tile-n">(\d+)</div><div class="tile-l">in flight</div>`)

// TestClaimCountsAreServedStaleWhileOneBackgroundReadReplacesThem: within
// the TTL the counts are reused; past it, and up to six TTLs, the page
// answers at once with the old counts while one background read replaces
// them; past that, a page reads afresh itself.
func TestClaimCountsAreServedStaleWhileOneBackgroundReadReplacesThem(t *testing.T) {
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	const ttl = 10 * time.Second
	b := setupAt(t, ttl, now)
	pool, ctx := b.pool, context.Background()
	op := b.operatorSignIn(t)
	inFlight := func() int {
		t.Helper()
		rec := b.do("GET", "/console/operator/claims", op, nil, nil)
		m := inFlightTile.FindStringSubmatch(rec.Body.String())
		if rec.Code != http.StatusOK || m == nil {
			t.Fatalf("claims page = %d without an in-flight count", rec.Code)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	plane := idempotency.NewService(pool, idempotency.Config{})
	claimMore := func(n int) {
		t.Helper()
		for range n {
			if _, err := plane.Claim(ctx, uuid.New(), "tool.email.send", uuid.NewString(), "h", time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}

	first := inFlight()
	claimMore(3)
	if got := inFlight(); got != first {
		t.Fatalf("within the TTL the counts changed from %d to %d: not reused", first, got)
	}
	advance(ttl + time.Second)
	if got := inFlight(); got != first {
		t.Fatalf("past the TTL the first page read afresh (%d, was %d): it should answer with the stale counts at once", got, first)
	}
	// The background read lands; a page then shows it without reading.
	deadline := time.Now().Add(10 * time.Second)
	for inFlight() != first+3 {
		if time.Now().After(deadline) {
			t.Fatalf("the background read never replaced the counts: still %d, want %d", inFlight(), first+3)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Long past the stale window, a page reads afresh before answering.
	claimMore(2)
	advance(7 * ttl)
	if got := inFlight(); got != first+5 {
		t.Fatalf("past six TTLs the page served old counts %d, want a fresh read of %d", got, first+5)
	}
}

// stuckTile reads the "stuck" count the claims page shows.
var stuckTile = regexp.MustCompile(`<div class="tile-n">(\d+)</div><div class="tile-l">stuck</div>`)

// TestAReleaseRereadsTheCountsBeforeItsPageIsServed: the page a release
// sends the operator to shows the claim gone from the stuck count, and is
// served from the counts the release read (claims made after it are not
// in them until the TTL passes), not by a read of its own.
func TestAReleaseRereadsTheCountsBeforeItsPageIsServed(t *testing.T) {
	b := setupAt(t, time.Hour, nil)
	pool, ctx, w := b.pool, context.Background(), b.world
	op := b.operatorSignIn(t)
	count := func(re *regexp.Regexp, page string) int {
		t.Helper()
		m := re.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("the claims page lacks a count for %s", re)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	page := b.do("GET", "/console/operator/claims", op, nil, nil).Body.String()
	stuckBefore, liveBefore := count(stuckTile, page), count(inFlightTile, page)
	form := b.stuckForm(t, op)
	rec := b.do("POST", "/console/operator/claims/"+w.Stuck.String()+"/release", op, form, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("release = %d, want 303", rec.Code)
	}
	plane := idempotency.NewService(pool, idempotency.Config{})
	if _, err := plane.Claim(ctx, uuid.New(), "tool.email.send", uuid.NewString(), "h", time.Hour); err != nil {
		t.Fatal(err)
	}
	page = b.do("GET", rec.Header().Get("Location"), op, nil, nil).Body.String()
	if got := count(stuckTile, page); got != stuckBefore-1 {
		t.Errorf("after the release the page counts %d stuck, want %d", got, stuckBefore-1)
	}
	if got := count(inFlightTile, page); got != liveBefore {
		t.Errorf("after the release the page counts %d in flight, want %d: the counts the release read, not a read of the page's own", got, liveBefore)
	}
}

// TestAPageWithNoCountsWaitsForThemAtMostTheWait: with no copy of the
// counts, the claims page waits for their read at most OverviewWait, then
// is served with its lists and the counts marked as being counted; the
// counts fragment answers once the read lands, and the next page is served
// from it. The read is held back by a real lock on a table only the
// overview reads (agent.webhook_drops, for the chart's drops).
func TestAPageWithNoCountsWaitsForThemAtMostTheWait(t *testing.T) {
	b := setupAt(t, time.Hour, nil, func(d *console.Deps) { d.OverviewWait = 20 * time.Millisecond })
	pool, ctx, w := b.pool, context.Background(), b.world
	op := b.operatorSignIn(t)

	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `LOCK TABLE agent.webhook_drops IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// get does a request in the background and gives its answer, or fails
	// the test when it has none in 10 s.
	get := func(target, cookie string) <-chan *httptest.ResponseRecorder {
		out := make(chan *httptest.ResponseRecorder, 1)
		go func() { out <- b.do("GET", target, cookie, nil, nil) }()
		return out
	}
	answer := func(ch <-chan *httptest.ResponseRecorder, what string) *httptest.ResponseRecorder {
		t.Helper()
		select {
		case rec := <-ch:
			return rec
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer in 10 s while the counts are being read", what)
			return nil
		}
	}

	rec := answer(get("/console/operator/claims", op), "the claims page")
	page := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("claims page while counting = %d", rec.Code)
	}
	for _, want := range []string{`data-counting="/console/operator/claims/counts"`, "Counting the plane", w.StuckKey} {
		if !strings.Contains(page, want) {
			t.Errorf("the claims page served while counting lacks %q", want)
		}
	}
	if inFlightTile.MatchString(page) {
		t.Errorf("the claims page served while counting shows counts")
	}
	if rec := answer(get("/console/operator/claims/counts", b.signIn(t, w.OrgA, "alice")), "counts, organization token"); rec.Code != http.StatusForbidden {
		t.Errorf("an organization token GET the counts = %d, want 403", rec.Code)
	}

	counts := get("/console/operator/claims/counts", op)
	select {
	case rec := <-counts:
		t.Fatalf("the counts answered %d before their read could land", rec.Code)
	case <-time.After(100 * time.Millisecond):
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	rec = answer(counts, "the counts")
	frag := rec.Body.String()
	if rec.Code != http.StatusOK || !inFlightTile.MatchString(frag) || !stuckTile.MatchString(frag) {
		t.Fatalf("the counts = %d without the tiles:\n%s", rec.Code, frag)
	}
	if strings.Contains(frag, "<html") || strings.Contains(frag, "data-counting") {
		t.Errorf("the counts fragment is a whole page, or still counting:\n%s", frag)
	}
	page = answer(get("/console/operator/claims", op), "the claims page after the read").Body.String()
	if strings.Contains(page, "data-counting") || !inFlightTile.MatchString(page) {
		t.Errorf("after the read the claims page is not served from it")
	}
}
