package goclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/client"
)

// TestAgainstSearchd runs the client against real `searchd serve`
// processes on loopback, each on its own database. The binary is built
// once, into this test's directory, which is removed after every subtest.
func TestAgainstSearchd(t *testing.T) {
	t.Parallel()
	bin := buildSearchd(t, t.TempDir())

	t.Run("TypedCallsRoundTripTheAPI", func(t *testing.T) { t.Parallel(); testRoundTrip(t, bin) })
	t.Run("LostAnswerIsReplayedNotStartedAgain", func(t *testing.T) { t.Parallel(); testLostAnswer(t, bin) })
	t.Run("KillBeforeTheRunCommitsThenRestartMakesOneRun", func(t *testing.T) { t.Parallel(); testKillBeforeRunInsert(t, bin) })
	t.Run("KillDuringTheFreezeWaitsOutTheLeaseThenMakesOneRun", func(t *testing.T) {
		if testing.Short() {
			t.Skip("waits out the 30 s lease of a saved-search start")
		}
		t.Parallel()
		testKillDuringFreeze(t, bin)
	})
	t.Run("ConcurrentStartsWithOneKeyMakeOneRun", func(t *testing.T) { t.Parallel(); testConcurrentStarts(t, bin) })
	t.Run("ProviderJobsRegisterOncePerRunAndRead", func(t *testing.T) { t.Parallel(); testProviderJobs(t, bin) })
	t.Run("LostRegistrationAnswerIsRetriedToTheOneJob", func(t *testing.T) { t.Parallel(); testLostRegistration(t, bin) })
	t.Run("DoubleSubmitIsAnsweredWithoutWaitingOutTheLease", func(t *testing.T) { t.Parallel(); testDoubleSubmit(t, bin) })
	t.Run("IteratorsAndTheSurfaceOfIssue15", func(t *testing.T) { t.Parallel(); testSurface(t, bin) })
	t.Run("ARuntimeVerifiesItsDispatchAndReportsTheStatus", func(t *testing.T) { t.Parallel(); testRuntime(t, bin) })
	t.Run("ACancelReachesTheRuntimeWhichReportsIt", func(t *testing.T) { t.Parallel(); testCancel(t, bin) })
	t.Run("SchedulesStartSavedSearchesOnTheirOwn", func(t *testing.T) { t.Parallel(); testSchedules(t, bin) })
}

// testDoubleSubmit is the double click of issue 15, from many tabs: 20
// concurrent starts with one key, at the server's defaults (the seed's
// contract case; issue 23: none is refused 429). With Prefer: wait (the
// client's default) every one is answered as soon as the first
// preparation ends, in milliseconds, not after the 30 s lease, and
// exactly one says Created.
func testDoubleSubmit(t *testing.T, bin string) {
	s := startSearchd(t, bin)
	ss := createSavedSearch(t, s)
	c, _ := newClient(t, s.url(), s.token, client.RetryPolicy{})
	ctx := withinAMinute(t)
	began := time.Now()
	results := make([]*client.StartResult, 20)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			res, err := c.StartSavedSearch(ctx, ss.ID, client.StartOptions{MaxResults: 10}, client.WithIdempotencyKey("double-click"))
			if err != nil {
				t.Errorf("start %d: %v", i, err)
				return
			}
			results[i] = res
		})
	}
	wg.Wait()
	took := time.Since(began)
	created := 0
	for _, r := range results {
		if r == nil {
			return
		}
		if r.Created {
			created++
		} else if !r.Replayed {
			t.Errorf("a start neither created nor replayed: %+v", r)
		}
		if r.Run.ID != results[0].Run.ID {
			t.Errorf("Runs %s and %s for one key", r.Run.ID, results[0].Run.ID)
		}
		// Prefer: wait answers a start in progress in the same request:
		// no 409 to retry.
		if r.Attempts != 1 {
			t.Errorf("a start took %d attempts, want 1 (Prefer: wait)", r.Attempts)
		}
	}
	if created != 1 {
		t.Errorf("%d starts say Created, want exactly 1", created)
	}
	if took > 5*time.Second {
		t.Errorf("%d concurrent starts took %s; want them answered within seconds (the lease is 30 s)", len(results), took)
	}
	t.Logf("%d concurrent starts with one key answered in %s", len(results), took)
}

// testSurface: list iterators across pages, the Runs' actor and key,
// If-Match through IfVersion, archived reads, keyed creates, drops.
func testSurface(t *testing.T, bin string) {
	s := startSearchd(t, bin)
	c, rec := newClient(t, s.url(), s.token, client.RetryPolicy{})
	ctx := withinAMinute(t)
	var ids []string
	for i := range 5 {
		ss, err := c.CreateSavedSearch(ctx, client.CreateSavedSearchParams{Name: "s" + string(rune('0'+i)), Brief: client.Brief{Query: "q"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ss.ID)
	}
	var seen []string
	n := attemptsOf(rec, func() {
		for ss, err := range c.SavedSearches(ctx, client.ListParams{Limit: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			seen = append(seen, ss.ID)
		}
	})
	slices.Reverse(ids) // newest first
	if !slices.Equal(seen, ids) || n != 3 {
		t.Errorf("SavedSearches yielded %v in %d requests, want %v in 3 pages", seen, n, ids)
	}
	n = attemptsOf(rec, func() {
		for range c.SavedSearches(ctx, client.ListParams{Limit: 2}) {
			break
		}
	})
	if n != 1 {
		t.Errorf("breaking after the first item made %d requests, want 1", n)
	}

	// A keyed create: the same key answers the same saved search.
	p := client.CreateSavedSearchParams{Name: "keyed", Brief: client.Brief{Query: "q"}}
	a, err := c.CreateSavedSearch(ctx, p, client.WithIdempotencyKey("create-once"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateSavedSearch(ctx, p, client.WithIdempotencyKey("create-once"))
	if err != nil || b.ID != a.ID {
		t.Errorf("the same key created %s then %v (%v), want one saved search", a.ID, b, err)
	}

	// A stale edit is refused with the current version.
	if _, err := c.UpdateSavedSearch(ctx, a.ID, client.UpdateSavedSearchParams{Name: new("v2"), IfVersion: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = c.UpdateSavedSearch(ctx, a.ID, client.UpdateSavedSearchParams{Name: new("lost"), IfVersion: 1})
	var ae *client.APIError
	if !errors.Is(err, client.ErrPreconditionFailed) || !errors.As(err, &ae) || ae.CurrentVersion != 2 {
		t.Errorf("stale UpdateSavedSearch = %v, want ErrPreconditionFailed at version 2", err)
	}

	// The Run says who started it, with which key; archived reads.
	res, err := c.StartSavedSearch(ctx, a.ID, client.StartOptions{}, client.WithIdempotencyKey("audit"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Run.CreatedBy == nil || *res.Run.CreatedBy != "client-test" || res.Run.IdempotencyKey != "audit" {
		t.Errorf("Run created_by %v, idempotency_key %q; want client-test and audit", res.Run.CreatedBy, res.Run.IdempotencyKey)
	}
	if err := c.ArchiveSavedSearch(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	arch, err := c.GetArchivedSavedSearch(ctx, a.ID)
	if err != nil || arch.ArchivedAt == nil {
		t.Errorf("GetArchivedSavedSearch = %+v, %v; want it with ArchivedAt", arch, err)
	}
	var archived []string
	for ss, err := range c.SavedSearches(ctx, client.ListParams{Archived: true}) {
		if err != nil {
			t.Fatal(err)
		}
		archived = append(archived, ss.ID)
	}
	if !slices.Equal(archived, []string{a.ID}) {
		t.Errorf("archived saved searches %v, want [%s]", archived, a.ID)
	}
	var runIDs []string
	for r, err := range c.Runs(ctx, client.ListRunsParams{SavedSearchID: a.ID}) {
		if err != nil {
			t.Fatal(err)
		}
		runIDs = append(runIDs, r.ID)
	}
	if !slices.Equal(runIDs, []string{res.Run.ID}) {
		t.Errorf("Runs of the archived saved search %v, want [%s]", runIDs, res.Run.ID)
	}

	// A job's drops read back.
	job, err := c.RegisterProviderJob(ctx, client.RegisterProviderJobParams{RunID: res.Run.ID, Provider: testProvider, ProviderJobID: "j-1"})
	if err != nil {
		t.Fatal(err)
	}
	drops, err := c.ListProviderJobDrops(ctx, job.Job.ID)
	if err != nil || len(drops) != 0 {
		t.Errorf("ListProviderJobDrops = %v, %v; want none", drops, err)
	}
}

// newClient returns a client of baseURL whose attempts are recorded. Each
// has its own transport, so its first request opens a new connection.
func newClient(t *testing.T, baseURL, token string, p client.RetryPolicy) (*client.Client, *recorder) {
	t.Helper()
	rec := &recorder{next: http.DefaultTransport.(*http.Transport).Clone()}
	c, err := client.New(baseURL, client.Options{HTTPClient: &http.Client{Transport: rec}, Token: token, Retry: p})
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c, rec
}

// createSavedSearch creates a saved search to start, directly on s.
func createSavedSearch(t *testing.T, s *searchd) *client.SavedSearch {
	t.Helper()
	c, _ := newClient(t, s.url(), s.token, client.RetryPolicy{})
	ss, err := c.CreateSavedSearch(context.Background(), client.CreateSavedSearchParams{
		Name: "laptops", Brief: client.Brief{Query: "laptop"}})
	if err != nil {
		t.Fatalf("CreateSavedSearch: %v", err)
	}
	return ss
}

// runsUnderKey counts the Runs admitted under a start key.
func (s *searchd) runsUnderKey(startKey string) int {
	return s.count(`SELECT count(*) FROM agent.runs WHERE organization_id = $1 AND start_key = $2`, s.org, startKey)
}

func (s *searchd) snapshotsOf(savedSearchID string) int {
	return s.count(`SELECT count(*) FROM agent.saved_search_snapshots WHERE saved_search_id = $1`, savedSearchID)
}

// claimStatus is the status of the saved-search start claim of key.
func (s *searchd) claimStatus(key string) string {
	s.t.Helper()
	var status string
	err := s.db.QueryRow(context.Background(), `SELECT status FROM agent.idempotency_keys
		WHERE organization_id = $1 AND scope = 'surface.saved_search.start' AND key = $2`, s.org, key).Scan(&status)
	if err != nil {
		s.t.Fatalf("reading the claim of %q: %v", key, err)
	}
	return status
}

// wantOneStart checks that the saved-search start of key left one Run
// under it, one snapshot of the saved search and its claim completed.
func (s *searchd) wantOneStart(key, savedSearchID string) {
	s.t.Helper()
	if n := s.runsUnderKey("saved_search:" + key); n != 1 {
		s.t.Errorf("%d Runs under the key, want 1", n)
	}
	if n := s.snapshotsOf(savedSearchID); n != 1 {
		s.t.Errorf("%d snapshots, want 1", n)
	}
	if st := s.claimStatus(key); st != "completed" {
		s.t.Errorf("claim after the start is %s, want completed", st)
	}
}

// wantUnauthorizedAtOnce checks that call, made through rec with a bad
// token, is refused ErrUnauthorized in one attempt.
func wantUnauthorizedAtOnce(t *testing.T, rec *recorder, name string, call func() error) {
	t.Helper()
	var err error
	if n := attemptsOf(rec, func() { err = call() }); !errors.Is(err, client.ErrUnauthorized) || n != 1 {
		t.Errorf("%s with a bad token: %v in %d attempts, want ErrUnauthorized at once", name, err, n)
	}
}

// attemptsOf returns how many attempts f made through rec.
func attemptsOf(rec *recorder, f func()) int {
	before := len(rec.list())
	f()
	return len(rec.list()) - before
}

func testRoundTrip(t *testing.T, bin string) {
	s := startSearchd(t, bin)
	c, rec := newClient(t, s.url(), s.token, client.RetryPolicy{})
	ctx := withinAMinute(t)

	// Saved searches: create, read, change, page through.
	price := json.Number("12345678901234567890") // beyond float64
	ss, err := c.CreateSavedSearch(ctx, client.CreateSavedSearchParams{
		Name:     "laptops",
		Brief:    client.Brief{Query: "laptop", Filters: map[string]any{"max_price": price}},
		Baseline: &client.BaselineInput{Items: []string{"a", "b"}},
	})
	if err != nil {
		t.Fatalf("CreateSavedSearch: %v", err)
	}
	if ss.Version != 1 || ss.OrganizationID != s.org.String() || !slices.Equal(ss.Baseline.Items, []string{"a", "b"}) {
		t.Errorf("CreateSavedSearch = %+v, want version 1 in the token's organization with the baseline", ss)
	}
	got, err := c.GetSavedSearch(ctx, ss.ID)
	if err != nil {
		t.Fatalf("GetSavedSearch: %v", err)
	}
	if got.Brief.Filters["max_price"] != price || got.Name != "laptops" {
		t.Errorf("GetSavedSearch = %+v, want the filter %s exactly", got, price)
	}
	renamed, err := c.UpdateSavedSearch(ctx, ss.ID, client.UpdateSavedSearchParams{Name: new("laptops 2")})
	if err != nil || renamed.Version != 2 || renamed.Name != "laptops 2" {
		t.Fatalf("UpdateSavedSearch = %+v, %v; want version 2 renamed", renamed, err)
	}
	var ae *client.APIError
	n := attemptsOf(rec, func() { _, err = c.UpdateSavedSearch(ctx, ss.ID, client.UpdateSavedSearchParams{}) })
	if !errors.Is(err, client.ErrValidation) || !errors.As(err, &ae) || len(ae.Errors) != 2 || n != 1 {
		t.Errorf("UpdateSavedSearch with no field: error %v in %d attempts, want one validation_failed naming 2 fields", err, n)
	}
	rebased, err := c.ReplaceBaseline(ctx, ss.ID, client.Baseline{Items: []string{"c"}, Cursor: new("p2")})
	if err != nil || rebased.Version != 3 || !slices.Equal(rebased.Baseline.Items, []string{"c"}) || *rebased.Baseline.Cursor != "p2" {
		t.Fatalf("ReplaceBaseline = %+v, %v; want version 3 with the new baseline", rebased, err)
	}
	for range 2 {
		if _, err := c.CreateSavedSearch(ctx, client.CreateSavedSearchParams{Name: "more", Brief: client.Brief{Query: "q"}}); err != nil {
			t.Fatalf("CreateSavedSearch: %v", err)
		}
	}
	page1, err := c.ListSavedSearches(ctx, client.ListParams{Limit: 2})
	if err != nil || len(page1.Items) != 2 || page1.NextCursor == "" {
		t.Fatalf("ListSavedSearches(limit 2) = %+v, %v; want 2 items and a cursor", page1, err)
	}
	page2, err := c.ListSavedSearches(ctx, client.ListParams{Limit: 2, Cursor: page1.NextCursor})
	if err != nil || len(page2.Items) != 1 || page2.NextCursor != "" || page2.Items[0].ID != ss.ID {
		t.Fatalf("ListSavedSearches(page 2) = %+v, %v; want the oldest, %s, and no cursor", page2, err, ss.ID)
	}

	// Starts: admitted once, replayed by key, refused for another request.
	first, err := c.StartSavedSearch(ctx, ss.ID, client.StartOptions{MaxResults: 5, Note: "n"})
	if err != nil {
		t.Fatalf("StartSavedSearch: %v", err)
	}
	if !first.Created || first.Replayed || first.Attempts != 1 || first.Snapshot == nil ||
		first.Run.Kind != client.KindSavedSearch || first.Run.SnapshotID == nil || *first.Run.SnapshotID != first.Snapshot.ID ||
		first.Run.SavedSearchID == nil || *first.Run.SavedSearchID != ss.ID || first.Snapshot.SavedSearchVersion != 3 {
		t.Fatalf("StartSavedSearch = %+v, want a created saved-search Run on the snapshot of version 3", first)
	}
	again, err := c.StartSavedSearch(ctx, ss.ID, client.StartOptions{MaxResults: 5, Note: "n"}, client.WithIdempotencyKey(first.IdempotencyKey))
	if err != nil || !again.Replayed || again.Created || again.Run.ID != first.Run.ID || again.Snapshot.ID != first.Snapshot.ID {
		t.Errorf("StartSavedSearch again = %+v, %v; want a replay of %s", again, err, first.Run.ID)
	}
	n = attemptsOf(rec, func() {
		_, err = c.StartSavedSearch(ctx, ss.ID, client.StartOptions{MaxResults: 6}, client.WithIdempotencyKey(first.IdempotencyKey))
	})
	if !errors.Is(err, client.ErrKeyReused) || n != 1 {
		t.Errorf("StartSavedSearch with the key of another request: %v in %d attempts, want ErrKeyReused at once", err, n)
	}

	// Reads of Runs and snapshots.
	run, err := c.GetRun(ctx, first.Run.ID)
	if err != nil || run.ID != first.Run.ID || run.Status != "queued" || !strings.Contains(string(run.Options), `"max_results":5`) {
		t.Errorf("GetRun = %+v, %v; want the queued Run with its options", run, err)
	}
	runs, err := c.ListRuns(ctx, client.ListRunsParams{SavedSearchID: ss.ID})
	if err != nil || len(runs.Items) != 1 || runs.Items[0].ID != first.Run.ID {
		t.Errorf("ListRuns(saved search) = %+v, %v; want the one Run", runs, err)
	}
	snap, err := c.GetSnapshot(ctx, first.Snapshot.ID)
	if err != nil || snap.Brief.Query != "laptop" || !slices.Equal(snap.Baseline.Items, []string{"c"}) ||
		snap.ContentHash != first.Snapshot.ContentHash || snap.CreatedBy == nil || *snap.CreatedBy != "client-test" {
		t.Errorf("GetSnapshot = %+v, %v; want the frozen brief and baseline, by the token's subject", snap, err)
	}

	// Direct starts.
	direct, err := c.StartRun(ctx, client.DirectStart{Kind: client.KindCapability, Name: "email.send",
		Input: map[string]any{"to": "x@example.com"}})
	if err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	var input map[string]any
	if err := json.Unmarshal(direct.Run.Input, &input); err != nil || len(input) != 1 || input["to"] != "x@example.com" ||
		!direct.Created || direct.Snapshot != nil || direct.Run.Kind != client.KindCapability {
		t.Errorf("StartRun = %+v with input %s; want a created capability Run with its input", direct, direct.Run.Input)
	}
	directAgain, err := c.StartRun(ctx, client.DirectStart{Kind: client.KindCapability, Name: "email.send",
		Input: json.RawMessage(`{ "to" : "x@example.com" }`)}, client.WithIdempotencyKey(direct.IdempotencyKey))
	if err != nil || !directAgain.Replayed || directAgain.Run.ID != direct.Run.ID {
		t.Errorf("StartRun again (input written differently) = %+v, %v; want a replay of %s", directAgain, err, direct.Run.ID)
	}
	if _, err := c.StartRun(ctx, client.DirectStart{Kind: "script", Name: "x"}); !errors.Is(err, client.ErrValidation) {
		t.Errorf("StartRun of an unknown kind: %v, want ErrValidation", err)
	}

	// The list's filters: each reaches the server, which keeps the Runs
	// they match.
	for _, f := range []struct {
		p    client.ListRunsParams
		want []string
	}{
		{client.ListRunsParams{IdempotencyKey: direct.IdempotencyKey}, []string{direct.Run.ID}},
		{client.ListRunsParams{Status: "queued", SavedSearchID: ss.ID}, []string{first.Run.ID}},
		{client.ListRunsParams{Status: "succeeded"}, nil},
		{client.ListRunsParams{CreatedAfter: first.Run.CreatedAt}, []string{direct.Run.ID}},
		{client.ListRunsParams{CreatedBefore: direct.Run.CreatedAt}, []string{first.Run.ID}},
		{client.ListRunsParams{CreatedAfter: first.Run.CreatedAt, CreatedBefore: direct.Run.CreatedAt}, nil},
	} {
		page, err := c.ListRuns(ctx, f.p)
		if err != nil {
			t.Errorf("ListRuns(%+v): %v", f.p, err)
			continue
		}
		var got []string
		for _, it := range page.Items {
			got = append(got, it.ID)
		}
		if !slices.Equal(got, f.want) {
			t.Errorf("ListRuns(%+v) = %v, %v; want %v", f.p, got, err, f.want)
		}
	}
	_, err = c.ListRuns(ctx, client.ListRunsParams{CreatedAfter: direct.Run.CreatedAt, CreatedBefore: first.Run.CreatedAt})
	if !errors.As(err, &ae) || ae.Code != "validation_failed" || len(ae.Errors) != 1 || ae.Errors[0].Field != "created_after" {
		t.Errorf("ListRuns(created_after later than created_before): %v, want validation_failed on created_after", err)
	}

	// Archive: gone for reads and starts, its audit trail stays.
	if err := c.ArchiveSavedSearch(ctx, ss.ID); err != nil {
		t.Fatalf("ArchiveSavedSearch: %v", err)
	}
	if _, err := c.GetSavedSearch(ctx, ss.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetSavedSearch after archive: %v, want ErrNotFound", err)
	}
	n = attemptsOf(rec, func() { _, err = c.StartSavedSearch(ctx, ss.ID, client.StartOptions{}) })
	if !errors.Is(err, client.ErrNotFound) || n != 1 {
		t.Errorf("StartSavedSearch after archive: %v in %d attempts, want ErrNotFound at once", err, n)
	}
	if err := c.ArchiveSavedSearch(ctx, ss.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("ArchiveSavedSearch twice: %v, want ErrNotFound", err)
	}
	snaps, err := c.ListSnapshots(ctx, ss.ID, client.ListParams{Limit: 1})
	if err != nil || len(snaps.Items) != 1 || snaps.Items[0].ID != first.Snapshot.ID || snaps.NextCursor != "" {
		t.Errorf("ListSnapshots after archive = %+v, %v; want the one snapshot, last page", snaps, err)
	}

	// Refusals.
	_, err = c.ListRuns(ctx, client.ListRunsParams{SavedSearchID: "not-a-uuid"})
	if !errors.As(err, &ae) || ae.Code != "validation_failed" || len(ae.Errors) != 1 || ae.Errors[0].Field != "saved_search_id" {
		t.Errorf("ListRuns(not a UUID): %v, want validation_failed on saved_search_id", err)
	}
	if _, err := c.GetRun(ctx, uuid.NewString()); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetRun(unknown): %v, want ErrNotFound", err)
	}
	stranger, strangerRec := newClient(t, s.url(), "not-a-jwt", client.RetryPolicy{})
	wantUnauthorizedAtOnce(t, strangerRec, "GetRun", func() error { _, err := stranger.GetRun(ctx, first.Run.ID); return err })
}

// testLostAnswer drops the answer of a start the server completed: the
// classic ambiguity. The retry, with the same key, must replay.
func testLostAnswer(t *testing.T, bin string) {
	s := startSearchd(t, bin)
	ss := createSavedSearch(t, s)
	proxy := newDropProxy(t, s.addr)
	ctx := withinAMinute(t)

	tests := []struct {
		name      string
		keyPrefix string // of the Run's start key
		start     func(c *client.Client) (*client.StartResult, error)
	}{
		{"saved search", "saved_search:", func(c *client.Client) (*client.StartResult, error) {
			return c.StartSavedSearch(ctx, ss.ID, client.StartOptions{Note: "lost"})
		}},
		{"direct", "direct:", func(c *client.Client) (*client.StartResult, error) {
			return c.StartRun(ctx, client.DirectStart{Kind: client.KindDefinition, Name: "report"})
		}},
	}
	for _, tt := range tests {
		c, rec := newClient(t, proxy.url(), s.token, client.RetryPolicy{})
		proxy.armed.Store(true)
		res, err := tt.start(c)
		if err != nil {
			t.Fatalf("%s start: %v", tt.name, err)
		}
		select {
		case <-proxy.dropped:
		default:
			t.Fatalf("%s start: the proxy dropped no answer", tt.name)
		}
		if !res.Replayed || res.Created || res.Attempts != 2 || !slices.Equal(rec.list(), []string{"error", "200"}) {
			t.Errorf("%s start = created %v replayed %v in %d attempts %q; want a replay on the second attempt after a lost answer",
				tt.name, res.Created, res.Replayed, res.Attempts, rec.list())
		}
		if n := s.runsUnderKey(tt.keyPrefix + res.IdempotencyKey); n != 1 {
			t.Errorf("%s start: %d Runs under the key, want 1", tt.name, n)
		}
	}
	if n := s.snapshotsOf(ss.ID); n != 1 {
		t.Errorf("%d snapshots of the saved search, want 1", n)
	}
}

type startAnswer struct {
	res *client.StartResult
	err error
}

// startInBackground starts ss on c with key in a goroutine.
func startInBackground(ctx context.Context, c *client.Client, ssID, key string) <-chan startAnswer {
	done := make(chan startAnswer, 1)
	go func() {
		res, err := c.StartSavedSearch(ctx, ssID, client.StartOptions{}, client.WithIdempotencyKey(key))
		done <- startAnswer{res, err}
	}()
	return done
}

// blockedStart starts a searchd and a start of a new saved search in the
// background, held back at its insert into table by a SHARE lock the test
// owns, and checks that its claim is processing. restart kills the server,
// releases the lock, restarts the server and returns the start's answer,
// which must succeed, with the outcomes of its attempts.
func blockedStart(t *testing.T, bin, table string) (ctx context.Context, s *searchd, c *client.Client, ss *client.SavedSearch, key string, restart func() (startAnswer, []string)) {
	t.Helper()
	s = startSearchd(t, bin)
	ss = createSavedSearch(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c, rec := newClient(t, s.url(), s.token, client.RetryPolicy{MaxAttempts: 100})
	key = client.NewIdempotencyKey()
	release := holdLock(t, s, table, "SHARE")
	done := startInBackground(ctx, c, ss.ID, key)
	s.waitForBlockedInsert(table)
	if st := s.claimStatus(key); st != "processing" {
		t.Fatalf("claim before the kill is %s, want processing", st)
	}
	return ctx, s, c, ss, key, func() (startAnswer, []string) {
		t.Helper()
		s.kill()
		release()
		time.Sleep(time.Second)
		s.start()
		var a startAnswer
		select {
		case a = <-done:
		case <-ctx.Done():
			t.Fatal("the start did not finish")
		}
		if a.err != nil {
			t.Fatalf("StartSavedSearch across the crash: %v (attempts %q)", a.err, rec.list())
		}
		outcomes := rec.list()
		t.Logf("attempts: %q", outcomes)
		return a, outcomes
	}
}

// holdLock takes lock on table in a transaction of s's database until the
// returned release is called (or the test ends).
func holdLock(t *testing.T, s *searchd, table, mode string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN "+mode+" MODE"); err != nil {
		t.Fatalf("locking %s: %v", table, err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(ctx) }) }
	t.Cleanup(release)
	return release
}

// testKillBeforeRunInsert SIGKILLs the server while its request is inside
// the start: the preparation's one transaction (completion, snapshot, Run
// insert and COMMIT, sent in one batch) is held back at the Run insert by a
// lock the test owns, so nothing of it is visible yet: the claim is still
// processing and there is no snapshot. The client sees its connection die
// and retries through the outage with the same key; the dead server's
// session may still commit the whole transaction once the lock goes, and
// the restarted server must then replay that Run, not add one: one Run, on
// the one snapshot.
func testKillBeforeRunInsert(t *testing.T, bin string) {
	// SHARE blocks the INSERT of a Run but not the reads before it. The
	// completion commits with the Run, never before it.
	ctx, s, c, ss, key, restart := blockedStart(t, bin, "agent.runs")
	if n := s.snapshotsOf(ss.ID); n != 0 {
		t.Fatalf("%d snapshots visible before the Run commits, want 0", n)
	}

	// The dead server's database session may still commit its Run now;
	// the restarted server must then replay it, not add one.
	a, outcomes := restart()
	if a.res.Attempts < 2 || outcomes[0] != "error" {
		t.Errorf("attempts %q, want the first to lose its connection and a retry", outcomes)
	}
	var frozen string
	if err := s.db.QueryRow(ctx, `SELECT id::text FROM agent.saved_search_snapshots WHERE saved_search_id = $1`, ss.ID).Scan(&frozen); err != nil {
		t.Fatalf("reading the frozen snapshot: %v", err)
	}
	if a.res.Snapshot == nil || a.res.Snapshot.ID != frozen || a.res.Run.SnapshotID == nil || *a.res.Run.SnapshotID != frozen {
		t.Errorf("start answered snapshot %+v and a Run on %v; want both the one snapshot %s",
			a.res.Snapshot, a.res.Run.SnapshotID, frozen)
	}
	s.wantOneStart(key, ss.ID)
	listed, err := c.ListRuns(ctx, client.ListRunsParams{SavedSearchID: ss.ID})
	if err != nil || len(listed.Items) != 1 || listed.Items[0].ID != a.res.Run.ID {
		t.Errorf("ListRuns = %+v, %v; want the one Run %s", listed, err, a.res.Run.ID)
	}
}

// testKillDuringFreeze SIGKILLs the server while its request holds the
// claim and has not completed it (the freeze waits on a lock the test
// owns). The claim stays processing until its 30 s lease passes, so the
// restarted server answers 409 in_progress with Retry-After; the client
// waits as told and the start that reclaims the key makes the one Run.
func testKillDuringFreeze(t *testing.T, bin string) {
	_, s, _, ss, key, restart := blockedStart(t, bin, "agent.saved_search_snapshots")
	// The dead server's transaction can never commit: it ends with its
	// session.
	a, outcomes := restart()
	inProgress := slices.IndexFunc(outcomes, func(o string) bool { return strings.HasPrefix(o, "409 Retry-After ") })
	if outcomes[0] != "error" || inProgress < 0 || outcomes[len(outcomes)-1] != "201" {
		t.Errorf("attempts %q, want a lost connection, then 409 with Retry-After, then 201", outcomes)
	}
	if !a.res.Created {
		t.Errorf("start answered created %v, want the reclaiming attempt's admission", a.res.Created)
	}
	// One snapshot: the dead server's freeze must have rolled back.
	s.wantOneStart(key, ss.ID)
}

// testConcurrentStarts sends one start ten times at once, as ten
// goroutines sharing a client and a key: one admission, nine replays.
func testConcurrentStarts(t *testing.T, bin string) {
	s := startSearchd(t, bin)
	ss := createSavedSearch(t, s)
	ctx := withinAMinute(t)
	// The losers of the race meet the winner's claim and are told to retry
	// after its whole lease (30 s), though the winner finishes in
	// milliseconds; a lower cap polls sooner.
	c, rec := newClient(t, s.url(), s.token, client.RetryPolicy{MaxAttempts: 30, MaxRetryAfter: time.Second})
	key := client.NewIdempotencyKey()

	const starts = 10
	answers := make([]startAnswer, starts)
	var wg sync.WaitGroup
	for i := range starts {
		wg.Go(func() {
			res, err := c.StartSavedSearch(ctx, ss.ID, client.StartOptions{Note: "together"}, client.WithIdempotencyKey(key))
			answers[i] = startAnswer{res, err}
		})
	}
	wg.Wait()
	t.Logf("attempts: %q", rec.list())
	created := 0
	for i, a := range answers {
		if a.err != nil {
			t.Fatalf("start %d: %v", i, a.err)
		}
		if a.res.Run.ID != answers[0].res.Run.ID {
			t.Errorf("start %d names Run %s, start 0 names %s", i, a.res.Run.ID, answers[0].res.Run.ID)
		}
		if a.res.Created {
			created++
		} else if !a.res.Replayed {
			t.Errorf("start %d is neither created nor replayed", i)
		}
	}
	if created != 1 {
		t.Errorf("%d starts were answered 201, want 1", created)
	}
	s.wantOneStart(key, ss.ID)
}
