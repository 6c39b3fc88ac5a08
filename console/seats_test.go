package console_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/console/consoletest"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// admissionBundle is a console on q, the seat queue the test
// controls as the API would share it.
func admissionBundle(t *testing.T, cfg seatq.Config) (*bundle, *seatq.Queue) {
	t.Helper()
	q, err := seatq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return setupAt(t, 0, nil, func(d *console.Deps) { d.Seats = q }), q
}

func waitForQueue(t *testing.T, q *seatq.Queue, what string, ok func(seatq.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(q.Stats(10)) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s (queue %+v)", what, q.Stats(10))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waiting(st seatq.Stats, kind seatq.Kind, name string) int {
	for _, f := range st.Flows {
		if f.Flow == (seatq.Flow{Kind: kind, Name: name}) {
			return f.Waiting
		}
	}
	return 0
}

// TestConsolePagesWaitTheirTurnChargedToTheirFlow: with the one seat
// taken (by the API, say), an auditor's page waits in its organization's
// flow and an operator's in the operator's own; one more page of the
// organization, its queue full, is the 429 page with Retry-After. Signing
// in takes no seat (it writes one session row). When the seat frees, both
// waiting pages are served and the queue ends empty.
func TestConsolePagesWaitTheirTurnChargedToTheirFlow(t *testing.T) {
	t.Parallel()
	b, q := admissionBundle(t, seatq.Config{Seats: 1, QueueLength: 1})
	seat, err := q.Acquire(context.Background(), seatq.Flow{Kind: seatq.KindOrganization, Name: "the-api"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	tokA, op := b.signIn(t, b.world.OrgA, "alice"), b.operatorSignIn(t)
	page := func(path, cookie string) <-chan *httptest.ResponseRecorder {
		ch := make(chan *httptest.ResponseRecorder, 1)
		go func() { ch <- b.do("GET", path, cookie, nil, nil) }()
		return ch
	}
	auditor := page("/console/saved-searches", tokA)
	operatorPage := page("/console/operator/sweeper", op)
	waitForQueue(t, q, "both pages waiting in their own flows", func(st seatq.Stats) bool {
		return waiting(st, seatq.KindOrganization, b.world.OrgA.String()) == 1 && waiting(st, seatq.KindOperator, "olga") == 1
	})
	rec := b.do("GET", "/console/runs", tokA, nil, nil)
	secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
	if rec.Code != 429 || err != nil || secs < 1 || !strings.Contains(rec.Body.String(), "Busy") {
		t.Errorf("the organization's page beyond its queue = %d, Retry-After %q, want the 429 page with Retry-After",
			rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := b.do("POST", "/console/sign-in", "", url.Values{"token": {token(t, b.world.OrgA, "alice")}},
		map[string]string{"Sec-Fetch-Site": "same-origin"}); rec.Code != 303 {
		t.Errorf("sign-in with every seat taken = %d, want 303 at once: it takes no seat", rec.Code)
	}
	seat.Release()
	for name, ch := range map[string]<-chan *httptest.ResponseRecorder{"auditor": auditor, "operator": operatorPage} {
		if rec := <-ch; rec.Code != 200 {
			t.Errorf("the %s's page once the seat freed = %d, want 200", name, rec.Code)
		}
	}
	waitForQueue(t, q, "nothing left", func(st seatq.Stats) bool { return st.InUse == 0 && st.FlowsTotal == 0 })
}

// TestTheClaimsPageShowsTheAdmissionQueue: the operator's overview lists
// the seats in use and the flows being served or waiting, the
// organization by its id and the operator by name (its page holding two
// seats, as every console page does).
func TestTheClaimsPageShowsTheAdmissionQueue(t *testing.T) {
	t.Parallel()
	b, q := admissionBundle(t, seatq.Config{Seats: 4})
	other := seatq.Flow{Kind: seatq.KindOrganization, Name: b.world.OrgB.String()}
	seat, err := q.Acquire(context.Background(), other, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer seat.Release()
	body := b.do("GET", "/console/operator/claims", b.operatorSignIn(t), nil, nil).Body.String()
	section := body[strings.Index(body, `id="seats"`):]
	section = section[:strings.Index(section, "</table>")]
	// The page takes two seats; the other organization's request one.
	for _, want := range []string{"3 / 4", "seats in use", "<td>organization</td>", b.world.OrgB.String(), "<td>operator</td>", ">olga<",
		"may have 512 requests waiting", "at most 10 s"} {
		if !strings.Contains(section, want) {
			t.Errorf("the admission section lacks %q:\n%s", want, section)
		}
	}
}

// TestAClientThatDoesNotReadItsPagesHoldsNoSeat: issue 36's console
// attack, heavy pages (a saved search of 10,000 items: 200 KB a page)
// pipelined on connections that never read. Each page is rendered under
// its seats and held, and the seats go back before it is written: once
// the connections' buffers are full no seat is in use, and another
// organization's page is served at once. (Written under the seat, each
// blocked connection held its two seats until the write timeout.)
func TestAClientThatDoesNotReadItsPagesHoldsNoSeat(t *testing.T) {
	t.Parallel()
	b, q := admissionBundle(t, seatq.Config{Seats: 2})
	large, err := consoletest.SeedLarge(context.Background(), b.pool, b.world.OrgA)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.handler)
	defer srv.Close()
	tokA, tokB := b.signIn(t, b.world.OrgA, "alice"), b.signIn(t, b.world.OrgB, "bob")
	var pipelined strings.Builder
	for range 40 {
		fmt.Fprintf(&pipelined, "GET /console/saved-searches/%s HTTP/1.1\r\nHost: x\r\nCookie: searchd_console=%s\r\n\r\n", large.Search, tokA)
	}
	for range 2 {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// A small receive buffer, so the server's writes fill it soon:
		// 40 pages of 200 KB are more than the socket buffers hold.
		if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, pipelined.String()); err != nil {
			t.Fatal(err)
		}
	}
	// Once the pages that fit in the connections' buffers are rendered,
	// every connection waits on a client that does not read, holding no
	// seat: the seats in use come to 0 and stay there. (Written under
	// the seat, the blocked connections hold them for the write timeout.)
	if !pgtest.Holds(func() bool { return q.Stats(1).InUse == 0 }, 2*time.Second, time.Minute) {
		t.Fatalf("seats still in use while the clients do not read (%+v), want none", q.Stats(10))
	}
	start := time.Now()
	if rec := b.do("GET", "/console/runs", tokB, nil, nil); rec.Code != 200 || time.Since(start) > 5*time.Second {
		t.Errorf("another organization's page = %d after %s, want 200 at once", rec.Code, time.Since(start))
	}
}

// TestAHeavyPageIsChargedToItsFlowsNextRequest: a page of a saved search
// of 10,000 items (about 200 KB) took the two seats of a page and cost
// more, by the bytes it rendered; while the organization is being served,
// its next request takes what the page owed on top of its own seat, and
// another organization's takes one (issue 36: 64 such pages held their
// seats as if each cost what a list of 100 rows does).
func TestAHeavyPageIsChargedToItsFlowsNextRequest(t *testing.T) {
	t.Parallel()
	b, q := admissionBundle(t, seatq.Config{Seats: 16})
	large, err := consoletest.SeedLarge(context.Background(), b.pool, b.world.OrgA)
	if err != nil {
		t.Fatal(err)
	}
	flow := func(name string) seatq.Flow { return seatq.Flow{Kind: seatq.KindOrganization, Name: name} }
	keep, err := q.Acquire(t.Context(), flow(b.world.OrgA.String()), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Release()
	rec := b.do("GET", "/console/saved-searches/"+large.Search.String(), b.signIn(t, b.world.OrgA, "alice"), nil, nil)
	cost := seatq.BytesWidth(int64(rec.Body.Len()))
	if rec.Code != 200 || cost <= 2 {
		t.Fatalf("the heavy page = %d with %d bytes (%d seats' worth), want 200 and more than a page's 2 seats", rec.Code, rec.Body.Len(), cost)
	}
	next, err := q.Acquire(t.Context(), flow(b.world.OrgA.String()), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release()
	if want := 1 + cost - 2; next.Width() != want {
		t.Errorf("the organization's next request takes %d seats, want %d: 1 and the %d the page owed", next.Width(), want, cost-2)
	}
	other, err := q.Acquire(t.Context(), flow(b.world.OrgB.String()), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if other.Width() != 1 {
		t.Errorf("another organization's request takes %d seats, want 1", other.Width())
	}
}
