package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/testkit/seatqtest"
	"github.com/searchd/searchd/schedule"
)

// TestServeGivesTheAPIAndTheConsoleOneSeatQueue serves with one
// seat. An API request holding it (a PATCH waiting on a row lock the test
// holds) makes a console page of another organization wait: the console
// and the API share one queue. The metrics show the seat taken and the
// page waiting, and name no organization; when the lock goes both are
// answered.
func TestServeGivesTheAPIAndTheConsoleOneSeatQueue(t *testing.T) {
	t.Parallel()
	dbURL := emptyDatabase(t)
	env := map[string]string{"DATABASE_URL": dbURL, "SEARCHD_JWT_SECRET": goodSecret,
		"SEARCHD_ADDR": "127.0.0.1:0", "SEARCHD_SWEEP_INTERVAL": "0s", "SEARCHD_APPLIER_INTERVAL": "0s",
		"SEARCHD_SEATS": "1", "SEARCHD_CONSOLE_TOKEN_SIGN_IN": "true"}
	if h := newHarness(env); h.run("migrate") != 0 {
		t.Fatalf("migrate: %s", h.stderr.String())
	}
	h := newHarness(env)
	addr, stop := h.start(t, "serve")
	base := "http://" + addr
	orgA, orgB := uuid.New(), uuid.New()
	token := func(org uuid.UUID) string {
		tok, err := auth.SignToken([]byte(goodSecret), org, "t", time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	call := func(method, path, body string, header map[string]string) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	authA := map[string]string{"Authorization": "Bearer " + token(orgA), "Content-Type": "application/json"}
	status, body := call("POST", "/v1/saved-searches", `{"name":"held","brief":{"query":"q"}}`, authA)
	if status != http.StatusCreated {
		t.Fatalf("create = %d %s", status, body)
	}
	id := body[strings.Index(body, `"id":"`)+6:]
	id = id[:36]

	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(context.Background(), `SELECT 1 FROM agent.saved_searches WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	patched := make(chan int, 1)
	go func() {
		s, _ := call("PATCH", "/v1/saved-searches/"+id, `{"name":"renamed"}`, authA)
		patched <- s
	}()
	metricsShow := func(what string, lines ...string) string {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			_, m := call("GET", "/metrics", "", nil)
			ok := true
			for _, l := range lines {
				ok = ok && strings.Contains(m, "\n"+l+"\n")
			}
			if ok {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("the metrics never showed %s (%v)", what, lines)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	metricsShow("the API request holding the one seat", "searchd_admission_seats 1", "searchd_admission_seats_in_use 1")
	// Signing in takes no seat; the page it opens waits for one.
	signIn, err := http.NewRequest("POST", base+"/console/sign-in", strings.NewReader(url.Values{"token": {token(orgB)}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	signIn.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	signIn.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(signIn)
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
		t.Fatalf("console sign-in = %d, session %q", res.StatusCode, session)
	}
	page := make(chan int, 1)
	go func() {
		s, _ := call("GET", "/console/saved-searches", "", map[string]string{"Cookie": "searchd_console=" + session})
		page <- s
	}()
	m := metricsShow("the console page waiting for the API's seat", "searchd_admission_queued_requests 1", "searchd_admission_waiting_flows 1")
	select {
	case s := <-page:
		t.Fatalf("the console page answered %d while the API held the only seat", s)
	default:
	}
	for _, org := range []uuid.UUID{orgA, orgB} {
		if bytes.Contains([]byte(m), []byte(org.String())) {
			t.Errorf("the metrics name organization %s", org)
		}
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := <-patched; s != http.StatusOK {
		t.Errorf("the held PATCH = %d, want 200", s)
	}
	if s := <-page; s != http.StatusOK {
		t.Errorf("the console page = %d, want 200 once the seat freed", s)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d: %s", code, h.stderr.String())
	}
}

// TestTheOldNamesOfRenamedSettingsStillWork: each renamed setting is
// still read under its old variable and its old flag, with one warning
// naming the new name; the old and the new set together are refused.
func TestTheOldNamesOfRenamedSettingsStillWork(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string, args ...string) (serverConfig, []string) {
		t.Helper()
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		serverFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		env["DATABASE_URL"], env["SEARCHD_JWT_SECRET"] = "postgres://u@localhost/db", strings.Repeat("s", 32)
		return loadSettings(fs, func(k string) string { return env[k] }, cmdServe)
	}
	old := map[string]string{"SEARCHD_ADMISSION_SEATS": "12", "SEARCHD_ADMISSION_QUEUE_LENGTH": "7",
		"SEARCHD_ADMISSION_MAX_WAIT": "2s", "SEARCHD_ADMISSION_WIDE_SEATS": "6", "SEARCHD_WEBHOOK_LEASE": "9s"}
	cfg, problems := load(old)
	if len(problems) > 0 || cfg.Seats != (seatq.Config{Seats: 12, QueueLength: 7, MaxWait: 2 * time.Second, WideSeats: 6}) ||
		cfg.Inbox.Lease != 9*time.Second {
		t.Fatalf("the old variables: %+v, lease %s, problems %q", cfg.Seats, cfg.Inbox.Lease, problems)
	}
	var buf bytes.Buffer
	warnRemovedSettings(newLogger(&buf, serverConfig{LogFormat: "text"}), func(string) string { return "" }, cfg.renamed)
	for _, want := range []string{"SEARCHD_ADMISSION_SEATS is deprecated: set SEARCHD_SEATS instead",
		"SEARCHD_WEBHOOK_LEASE is deprecated: set SEARCHD_PROVIDER_WEBHOOK_LEASE instead"} {
		if got := buf.String(); strings.Count(got, want) != 1 || strings.Count(got, "level=WARN") != 5 {
			t.Errorf("warnings = %q, want one %q among 5", got, want)
		}
	}
	cfg, problems = load(map[string]string{}, "--admission-seats", "5", "--webhook-lease", "3s")
	if len(problems) > 0 || cfg.Seats.Seats != 5 || cfg.Inbox.Lease != 3*time.Second ||
		!strings.Contains(strings.Join(cfg.renamed, "\n"), "--admission-seats is deprecated: set --seats instead") {
		t.Errorf("the old flags: %+v, lease %s, renamed %q, problems %q", cfg.Seats, cfg.Inbox.Lease, cfg.renamed, problems)
	}
	_, problems = load(map[string]string{"SEARCHD_ADMISSION_SEATS": "12", "SEARCHD_SEATS": "12"})
	if len(problems) != 1 || problems[0] != "SEARCHD_SEATS: SEARCHD_ADMISSION_SEATS is its old name: set one of them" {
		t.Errorf("both names set: problems %q, want one naming both", problems)
	}
	_, problems = load(map[string]string{"SEARCHD_ADMISSION_SEATS": "0"})
	if len(problems) != 1 || !strings.HasPrefix(problems[0], "SEARCHD_ADMISSION_SEATS: 0 is out of range") {
		t.Errorf("a bad value under the old name: problems %q, want it named as given", problems)
	}
}

func TestTheRemovedLimitsAreNamedWhenStillSet(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	env := map[string]string{"SEARCHD_ORG_MAX_IN_FLIGHT": "4"}
	warnRemovedSettings(newLogger(&buf, serverConfig{LogFormat: "text"}), func(k string) string { return env[k] }, nil)
	if got := buf.String(); !strings.Contains(got, "SEARCHD_ORG_MAX_IN_FLIGHT is no longer read") || strings.Contains(got, "SEARCHD_MAX_IN_FLIGHT ") {
		t.Errorf("warnings = %q, want one naming SEARCHD_ORG_MAX_IN_FLIGHT alone", got)
	}
}

// TestTheDrainsStartsTakeASeatOfTheirOrganization: a scheduled start runs
// holding a seat of its organization's flow, as an API request does; with
// every seat taken past the queue's longest wait it is not run and its
// error is errs.Unavailable, which the drain records as not ready (tried
// again later), never as a refusal of the occurrence.
func TestTheDrainsStartsTakeASeatOfTheirOrganization(t *testing.T) {
	t.Parallel()
	q := seatqtest.New(t, seatq.Config{Seats: 1, MaxWait: 50 * time.Millisecond})
	org := uuid.New()
	var during seatq.Stats
	calls := 0
	start := seated(q, func(context.Context, admission.SavedSearchStart) (admission.Result, error) {
		calls++
		during = q.Stats(10)
		return admission.Result{}, nil
	})
	if _, err := start(context.Background(), admission.SavedSearchStart{Org: org}); err != nil {
		t.Fatalf("a start with a free seat: %v", err)
	}
	if calls != 1 || during.InUse != 1 || len(during.Flows) != 1 ||
		during.Flows[0].Flow != (seatq.Flow{Kind: seatq.KindOrganization, Name: org.String()}) {
		t.Errorf("during the start: %d calls, stats %+v; want one call holding its organization's seat", calls, during)
	}
	if st := q.Stats(10); st.InUse != 0 {
		t.Errorf("after the start %d seats in use, want 0", st.InUse)
	}
	held, err := q.Acquire(context.Background(), seatq.Flow{Kind: seatq.KindOrganization, Name: "the-api"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	_, err = start(context.Background(), admission.SavedSearchStart{Org: org})
	if !errs.Is(err, errs.Unavailable) || !errors.Is(err, schedule.ErrBusy) || calls != 1 {
		t.Errorf("a start with every seat taken past the wait = %v after %d calls; want errs.Unavailable and "+
			"schedule.ErrBusy (tried again at the next tick), not run", err, calls)
	}
}

// TestWideRequestsShareAtMostTwiceTheProcessors: the wide requests' share
// is half the seats, at most twice the processors, at least one; a share
// set above the seats is refused, naming both settings.
func TestWideRequestsShareAtMostTwiceTheProcessors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ seats, procs, want int }{
		{16, 2, 4}, {16, 8, 8}, {16, 1, 2}, {16, 64, 8}, {4, 2, 2}, {1, 2, 1}, {3, 1, 1},
	} {
		if got := wideSeats(tt.seats, tt.procs); got != tt.want {
			t.Errorf("wideSeats(%d seats, %d processors) = %d, want %d", tt.seats, tt.procs, got, tt.want)
		}
	}
	_, pool := newDB(t)
	if _, err := newSeatQueue(seatq.Config{Seats: 4, WideSeats: 5}, pool, nil); err == nil ||
		!strings.Contains(err.Error(), envWideSeats) || !strings.Contains(err.Error(), envSeats) {
		t.Errorf("a wide share over the seats: %v, want an error naming both settings", err)
	}
}
