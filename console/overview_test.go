package console_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/console/consoletest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/pgtest"
)

// inFlightTile reads the "in flight" count the claims page shows.
var inFlightTile = regexp.MustCompile(`<div class="tile-n">(\d+)</div><div class="tile-l">in flight</div>`)

// TestClaimCountsAreServedStaleWhileOneBackgroundReadReplacesThem: within
// the TTL the counts are reused; past it, and up to six TTLs, the page
// answers at once with the old counts while one background read replaces
// them; past that, a page reads afresh itself.
func TestClaimCountsAreServedStaleWhileOneBackgroundReadReplacesThem(t *testing.T) {
	pool := pgtest.NewDB(t)
	ctx := context.Background()
	if _, err := consoletest.Seed(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	const ttl = 10 * time.Second
	b := &bundle{pool: pool, handler: newConsoleAt(t, pool, io.Discard, ttl, now)}
	op := b.operatorToken(t)
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
