package api_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/snapshot"
)

// startResult is the body of a start.
type startResult struct {
	Run      runs.Run          `json:"run"`
	Snapshot *snapshot.Summary `json:"snapshot"`
}

func TestStartSavedSearchAdmitsOnceThenReplays(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{items: []string{"seen-1"}})

	first := b.start(ss.ID, "start-1", map[string]any{"max_results": 25, "note": "first"})
	if first.status != http.StatusCreated {
		t.Fatalf("first start = %d %s, want 201", first.status, first.body)
	}
	var got startResult
	first.decode(t, &got)
	if loc, want := first.header.Get("Location"), "/v1/runs/"+got.Run.ID.String(); loc != want {
		t.Errorf("Location = %q, want %q", loc, want)
	}
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("first start carries Idempotent-Replayed")
	}
	run := got.Run
	if run.Kind != runs.KindSavedSearch || run.Status != runs.StatusQueued || run.OrganizationID != b.org ||
		run.SavedSearchID == nil || *run.SavedSearchID != ss.ID || got.Snapshot == nil ||
		run.SnapshotID == nil || *run.SnapshotID != got.Snapshot.ID || string(run.Input) != "null" {
		t.Fatalf("run %+v snapshot %+v: want a queued saved_search Run on its snapshot", run, got.Snapshot)
	}
	if !bytes.Contains(run.Options, []byte(`"max_results":25`)) {
		t.Errorf("options = %s, want max_results 25", run.Options)
	}
	if d := run.RetainUntil.Sub(run.CreatedAt); d != runs.Retention {
		t.Errorf("retain_until - created_at = %s, want %s", d, runs.Retention)
	}

	// The same request, written differently: key order and white space.
	again := b.start(ss.ID, "start-1", "{ \"note\" : \"first\",\n \"max_results\": 25 }")
	if again.status != http.StatusOK || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat = %d (Idempotent-Replayed %q), want 200 and true", again.status, again.header.Get("Idempotent-Replayed"))
	}
	if !bytes.Equal(again.body, first.body) {
		t.Errorf("repeat body\n%s\nwant the first body\n%s", again.body, first.body)
	}
	if again.header.Get("Location") != first.header.Get("Location") {
		t.Errorf("repeat Location = %q, want %q", again.header.Get("Location"), first.header.Get("Location"))
	}
	// The quoted structured-field form names the same key.
	quoted := b.start(ss.ID, `"start-1"`, map[string]any{"max_results": 25, "note": "first"})
	if quoted.status != http.StatusOK || !bytes.Equal(quoted.body, first.body) {
		t.Errorf("quoted key repeat = %d %s, want 200 and the first body", quoted.status, quoted.body)
	}

	// The frozen snapshot is readable and holds the baseline of the freeze.
	res := b.do(req{method: http.MethodGet, path: "/v1/snapshots/" + got.Snapshot.ID.String()})
	var snap snapshot.Snapshot
	res.decode(t, &snap)
	if res.status != http.StatusOK || snap.SavedSearchID != ss.ID || snap.SavedSearchVersion != ss.Version ||
		len(snap.Baseline.Items) != 1 || snap.ContentHash != got.Snapshot.ContentHash ||
		snap.CreatedBy == nil || *snap.CreatedBy != "tester" {
		t.Errorf("snapshot = %d %+v, want the frozen copy by the token's sub", res.status, snap)
	}
	b.wantCount(t, 1, `SELECT count(*) FROM agent.runs`)
	b.wantCount(t, 1, `SELECT count(*) FROM agent.saved_search_snapshots`)
}

func TestStartDefaultsAreOneRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	first := b.start(ss.ID, "defaults", nil) // no body at all
	if first.status != http.StatusCreated {
		t.Fatalf("start without a body = %d %s, want 201", first.status, first.body)
	}
	for _, body := range []any{"", "  ", "{}", `{"max_results": 100}`, `{"max_results": null, "note": ""}`} {
		res := b.start(ss.ID, "defaults", body)
		if res.status != http.StatusOK || !bytes.Equal(res.body, first.body) {
			t.Errorf("start with body %q = %d %s, want the replay of the defaults", body, res.status, res.body)
		}
	}
}

func TestStartKeyReusedForAnotherRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	other := b.seedSavedSearch(seedOpts{})
	if res := b.start(ss.ID, "reused", map[string]any{"max_results": 5}); res.status != http.StatusCreated {
		t.Fatalf("start = %d %s", res.status, res.body)
	}
	for _, tt := range []struct {
		name string
		id   uuid.UUID
		body any
	}{
		{"other options", ss.ID, map[string]any{"max_results": 6}},
		{"other saved search", other.ID, map[string]any{"max_results": 5}},
	} {
		res := b.start(tt.id, "reused", tt.body)
		res.wantProblem(t, http.StatusUnprocessableEntity, "key_reused", "%s: start", tt.name)
	}
}

func TestStartUnknownSavedSearchIsNotFoundBeforeAnyClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	res := b.start(uuid.New(), "nothing", nil)
	if res.status != http.StatusNotFound || res.problem(t).Code != "not_found" {
		t.Fatalf("start of an unknown saved search = %d %s, want 404 not_found", res.status, res.body)
	}
	b.wantCount(t, 0, `SELECT count(*) FROM agent.idempotency_keys`)
}

func TestStartInProgressThenReclaimedAfterLease(t *testing.T) {
	t.Parallel()
	clk := dbclocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	b := setup(t, setupOpts{clock: clk.Clock()})
	ss := b.seedSavedSearch(seedOpts{})

	// Another worker holds a live preparation of this very request.
	opts := admission.StartOptions{MaxResults: 7}
	plane := idempotency.NewService(b.pool, idempotency.Config{Clock: clk.Clock()})
	out, err := plane.Claim(context.Background(), b.org, idempotency.ScopeSavedSearchStart, "held",
		admission.SavedSearchRequestHash(ss.ID, opts), idempotency.SavedSearchStartLease)
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim = %v, %v; want claimed", out.Kind, err)
	}

	clk.Advance(10 * time.Second)
	res := b.start(ss.ID, "held", map[string]any{"max_results": 7})
	if res.status != http.StatusConflict || res.problem(t).Code != "in_progress" {
		t.Fatalf("start during a live preparation = %d %s, want 409 in_progress", res.status, res.body)
	}
	// A hint of when the answer is likely ready, not the lease: a
	// preparation takes milliseconds, and the lease bounds only the
	// recovery from a crashed holder.
	if ra := res.header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After = %q, want 1 (a hint, not the rest of the 30 s lease)", ra)
	}
	b.wantCount(t, 0, `SELECT count(*) FROM agent.saved_search_snapshots`)

	// After the lease the holder is presumed dead: the next caller reclaims.
	clk.Advance(21 * time.Second)
	res = b.start(ss.ID, "held", map[string]any{"max_results": 7})
	if res.status != http.StatusCreated {
		t.Fatalf("start after the lease = %d %s, want 201", res.status, res.body)
	}
	b.wantCount(t, 1, `SELECT count(*) FROM agent.runs`)
}

func TestConcurrentStartsAdmitOneRun(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{items: []string{"a", "b", "c"}})

	const callers = 20
	var (
		wg      sync.WaitGroup
		created atomic.Int32
		gate    = make(chan struct{})
		answers = make([]*response, callers)
		errs    = make([]error, callers)
	)
	for i := range callers {
		wg.Go(func() {
			<-gate
			answers[i], errs[i] = b.send(req{method: http.MethodPost,
				path:   "/v1/saved-searches/" + ss.ID.String() + "/start",
				body:   map[string]any{"max_results": 10},
				header: map[string]string{"Idempotency-Key": "twenty"}})
		})
	}
	close(gate)
	wg.Wait()

	runIDs := map[uuid.UUID]bool{}
	for i, res := range answers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		switch res.status {
		case http.StatusCreated, http.StatusOK:
			if res.status == http.StatusCreated {
				created.Add(1)
			} else if res.header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("caller %d: 200 without Idempotent-Replayed", i)
			}
			var got startResult
			res.decode(t, &got)
			runIDs[got.Run.ID] = true
		case http.StatusConflict:
			if p := res.problem(t); p.Code != "in_progress" || res.header.Get("Retry-After") == "" {
				t.Errorf("caller %d: 409 %s without in_progress and Retry-After", i, res.body)
			}
		default:
			t.Errorf("caller %d: %d %s, want 201, 200 or 409", i, res.status, res.body)
		}
	}
	if created.Load() != 1 {
		t.Errorf("%d answers were 201, want exactly 1", created.Load())
	}
	if len(runIDs) != 1 {
		t.Errorf("answers name %d Runs, want 1", len(runIDs))
	}
	b.wantCount(t, 1, `SELECT count(*) FROM agent.runs`)
	b.wantCount(t, 1, `SELECT count(*) FROM agent.saved_search_snapshots`)
}

// startDirect posts a direct start (POST /v1/runs) with key and body.
func (b *bundle) startDirect(key string, body any) *response {
	b.t.Helper()
	return b.do(req{method: http.MethodPost, path: "/v1/runs", body: body, header: map[string]string{"Idempotency-Key": key}})
}

func TestStartDirectAdmitsWithoutAClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	body := map[string]any{"kind": "capability", "name": "web.search", "input": map[string]any{"q": "go", "n": 3}}
	first := b.startDirect("direct-1", body)
	if first.status != http.StatusCreated {
		t.Fatalf("direct start = %d %s, want 201", first.status, first.body)
	}
	var got startResult
	first.decode(t, &got)
	if got.Snapshot != nil || got.Run.Kind != "capability" || got.Run.Name == nil || *got.Run.Name != "web.search" ||
		got.Run.SavedSearchID != nil || got.Run.SnapshotID != nil || string(got.Run.Options) != "null" {
		t.Errorf("direct start = %+v, want a capability Run without snapshot", got)
	}
	if loc := first.header.Get("Location"); loc != "/v1/runs/"+got.Run.ID.String() {
		t.Errorf("Location = %q", loc)
	}

	again := b.startDirect("direct-1", `{"input": {"n": 3, "q": "go"}, "name": "web.search", "kind": "capability"}`)
	if again.status != http.StatusOK || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
		t.Errorf("direct repeat = %d %s, want 200 replayed with the first body", again.status, again.body)
	}
	reused := b.startDirect("direct-1", map[string]any{"kind": "capability", "name": "web.search", "input": map[string]any{"q": "rust"}})
	if reused.status != http.StatusUnprocessableEntity || reused.problem(t).Code != "key_reused" {
		t.Errorf("direct start with the key reused = %d %s, want 422 key_reused", reused.status, reused.body)
	}
	// A definition start with no input takes {}.
	def := b.startDirect("direct-2", map[string]any{"kind": "definition", "name": "digest"})
	var defGot startResult
	def.decode(t, &defGot)
	if def.status != http.StatusCreated || string(defGot.Run.Input) != "{}" {
		t.Errorf("definition start = %d %s, want 201 with input {}", def.status, def.body)
	}
	// Direct starts write no claim.
	b.wantCount(t, 0, `SELECT count(*) FROM agent.idempotency_keys`)
}

func TestOneKeyOnBothSurfacesNamesTwoRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	var fromSaved, fromDirect startResult
	b.start(ss.ID, "shared-key", nil).decode(t, &fromSaved)
	res := b.startDirect("shared-key", map[string]any{"kind": "definition", "name": "n"})
	res.decode(t, &fromDirect)
	if res.status != http.StatusCreated || fromDirect.Run.ID == fromSaved.Run.ID {
		t.Errorf("direct start with a saved-search key = %d, run %s (saved-search run %s); want 201 and another Run",
			res.status, fromDirect.Run.ID, fromSaved.Run.ID)
	}
}

func TestRunsReadAndList(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	other := b.seedSavedSearch(seedOpts{})
	var ids []uuid.UUID
	for i := range 3 {
		var got startResult
		b.start(ss.ID, "k"+strconv.Itoa(i), nil).decode(t, &got)
		ids = append(ids, got.Run.ID)
	}
	b.start(other.ID, "other", nil)

	res := b.do(req{method: http.MethodGet, path: "/v1/runs/" + ids[0].String()})
	var run runs.Run
	res.decode(t, &run)
	if res.status != http.StatusOK || run.ID != ids[0] {
		t.Errorf("get run = %d %s", res.status, res.body)
	}

	var page struct {
		Items      []runs.Run
		NextCursor *string `json:"next_cursor"`
	}
	b.do(req{method: http.MethodGet, path: "/v1/runs"}).decode(t, &page)
	if len(page.Items) != 4 || page.NextCursor != nil {
		t.Errorf("list runs = %d items (next %v), want 4 and no next page", len(page.Items), page.NextCursor)
	}
	b.do(req{method: http.MethodGet, path: "/v1/runs?limit=2&saved_search_id=" + ss.ID.String()}).decode(t, &page)
	if len(page.Items) != 2 || page.Items[0].ID != ids[2] || page.NextCursor == nil {
		t.Fatalf("first page of the saved search's runs = %+v, want the 2 newest and a cursor", page)
	}
	b.do(req{method: http.MethodGet, path: "/v1/runs?limit=2&saved_search_id=" + ss.ID.String() + "&cursor=" + *page.NextCursor}).decode(t, &page)
	if len(page.Items) != 1 || page.Items[0].ID != ids[0] || page.NextCursor != nil {
		t.Errorf("second page = %+v, want the oldest and no cursor", page)
	}

	var snaps struct{ Items []snapshot.Snapshot }
	res = b.do(req{method: http.MethodGet, path: "/v1/saved-searches/" + ss.ID.String() + "/snapshots"})
	res.decode(t, &snaps)
	if res.status != http.StatusOK || len(snaps.Items) != 3 {
		t.Errorf("snapshots of the saved search = %d, %d items, want 3", res.status, len(snaps.Items))
	}
	for i := 1; i < len(snaps.Items); i++ {
		if snaps.Items[i].CreatedAt.After(snaps.Items[i-1].CreatedAt) {
			t.Errorf("snapshots not newest first: %s before %s", snaps.Items[i-1].CreatedAt, snaps.Items[i].CreatedAt)
		}
	}
}

func TestStartRecordsNoActorWithoutSub(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	b.token = b.tokenFor(b.org, "")
	var got startResult
	b.start(ss.ID, "anon", nil).decode(t, &got)
	var snap snapshot.Snapshot
	b.do(req{method: http.MethodGet, path: "/v1/snapshots/" + got.Snapshot.ID.String()}).decode(t, &snap)
	if snap.CreatedBy != nil {
		t.Errorf("created_by = %q, want null for a token without sub", *snap.CreatedBy)
	}
}

// TestAStartAnswersWhatEncodingJSONWrites: the start answer is written
// without reflection (startResponse.appendJSON); it must be byte for byte
// what c.JSON writes by reflection, which the server still uses when the
// request has a query (?pretty indents). A note and a name that need
// escaping go through both.
func TestAStartAnswersWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{name: "leads <b>&</b> " + uuid.NewString()[:8]})
	body := map[string]any{"max_results": 25, "note": "say \"hi\" <now> & \t \u2028 naïve"}
	first := b.start(ss.ID, "escape-1", body)
	if first.status != http.StatusCreated {
		t.Fatalf("first start = %d %s", first.status, first.body)
	}
	fast := b.start(ss.ID, "escape-1", body)
	reflective := b.do(req{method: http.MethodPost, path: "/v1/saved-searches/" + ss.ID.String() + "/start?by=reflection",
		body: body, header: map[string]string{"Idempotency-Key": "escape-1"}})
	if fast.status != http.StatusOK || reflective.status != http.StatusOK {
		t.Fatalf("replays = %d and %d, want 200", fast.status, reflective.status)
	}
	if !bytes.Equal(fast.body, reflective.body) || !bytes.Equal(first.body, reflective.body) {
		t.Fatalf("the answers differ:\n first %s\n  fast %s\nby c.JSON %s", first.body, fast.body, reflective.body)
	}
	if ct := fast.header.Get("Content-Type"); ct != reflective.header.Get("Content-Type") {
		t.Errorf("Content-Type %q, c.JSON's %q", ct, reflective.header.Get("Content-Type"))
	}
	if !bytes.Contains(first.body, []byte(`\u003cb\u003e\u0026`)) || !bytes.HasSuffix(first.body, []byte("}\n")) {
		t.Errorf("the answer is not escaped for HTML or lacks the final newline: %s", first.body)
	}
}
