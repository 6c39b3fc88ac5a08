package api_test

// The surface a product UI and its users touch (issue 15): double clicks,
// keyed creates, lost edits, browsers, HTTP details and the audit trail,
// each proved through HTTP against real PostgreSQL.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/readiness"
	"github.com/searchd/searchd/savedsearch"
)

// startAnswer is the part of a start's body these tests read.
type startAnswer struct {
	Run struct {
		ID             uuid.UUID      `json:"id"`
		CreatedBy      *string        `json:"created_by"`
		IdempotencyKey string         `json:"idempotency_key"`
		Options        map[string]any `json:"options"`
	} `json:"run"`
}

// TestDoubleClickAnswersOneCreatedAndReplaysTheRestAtOnce is the double
// click: five concurrent starts with one key and Prefer: wait. Exactly
// one answers 201 (the one that froze the snapshot), the others 200 with
// Idempotent-Replayed and the same Run, and all are answered within
// seconds, not after the 30 s lease.
func TestDoubleClickAnswersOneCreatedAndReplaysTheRestAtOnce(t *testing.T) {
	t.Parallel()
	b := waitSetup(t, 8)
	ss := b.seedSavedSearch(seedOpts{})
	began := time.Now()
	var answers []timedResponse
	var chans []<-chan timedResponse
	for range 5 {
		chans = append(chans, b.startAsync(ss.ID, "double-click", "wait=10"))
	}
	for _, ch := range chans {
		answers = append(answers, <-ch)
	}
	created, runs := 0, map[uuid.UUID]bool{}
	for i, a := range answers {
		if a.err != nil {
			t.Fatalf("start %d: %v", i, a.err)
		}
		var body startAnswer
		a.res.decode(t, &body)
		runs[body.Run.ID] = true
		switch a.res.status {
		case http.StatusCreated:
			created++
			if got := a.res.header.Get(api.HeaderIdempotentReplayed); got != "" {
				t.Errorf("the 201 carries Idempotent-Replayed %q", got)
			}
		case http.StatusOK:
			if got := a.res.header.Get(api.HeaderIdempotentReplayed); got != "true" {
				t.Errorf("start %d: 200 with Idempotent-Replayed %q, want true", i, got)
			}
		default:
			t.Errorf("start %d = %d %s, want 201 or 200", i, a.res.status, a.res.body)
		}
		if d := a.at.Sub(began); d > 5*time.Second {
			t.Errorf("start %d answered after %s; a preparation takes milliseconds", i, d)
		}
	}
	if created != 1 || len(runs) != 1 {
		t.Errorf("%d answers were 201 and they name %d Runs; want exactly one 201 and one Run", created, len(runs))
	}
}

// TestKeyedSavedSearchCreateRunsOnce: the same key twice creates one saved
// search (201, then 200 Idempotent-Replayed with the same one), another
// body under the key is 422, and twenty concurrent creates with one key
// make one saved search.
func TestKeyedSavedSearchCreateRunsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	body := map[string]any{"name": "Go jobs", "brief": map[string]any{"query": "golang"}}
	create := func(key string, body any) *response {
		return b.do(req{method: http.MethodPost, path: "/v1/saved-searches", body: body,
			header: map[string]string{"Idempotency-Key": key}})
	}
	first := create("create-1", body)
	var a, c savedsearch.SavedSearch
	first.decode(t, &a)
	if first.status != http.StatusCreated || first.header.Get("ETag") != `"1"` {
		t.Fatalf("first create = %d (ETag %q) %s, want 201 with ETag \"1\"", first.status, first.header.Get("ETag"), first.body)
	}
	// The same request written differently (an explicit empty baseline).
	again := create("create-1", map[string]any{"brief": map[string]any{"query": "golang"}, "name": "Go jobs",
		"baseline": map[string]any{"items": []string{}}})
	again.decode(t, &c)
	if again.status != http.StatusOK || again.header.Get(api.HeaderIdempotentReplayed) != "true" || c.ID != a.ID ||
		again.header.Get("Location") != "/v1/saved-searches/"+a.ID.String() {
		t.Errorf("repeat = %d (replayed %q, Location %q) id %s, want 200 replayed with saved search %s",
			again.status, again.header.Get(api.HeaderIdempotentReplayed), again.header.Get("Location"), c.ID, a.ID)
	}
	if res := create("create-1", map[string]any{"name": "Rust jobs", "brief": map[string]any{"query": "rust"}}); res.status != http.StatusUnprocessableEntity ||
		res.problem(t).Code != api.CodeKeyReused {
		t.Errorf("another body under the key = %d %s, want 422 key_reused", res.status, res.body)
	}
	b.wantCount(t, 1, `SELECT count(*) FROM agent.saved_searches WHERE organization_id = $1`, b.org)
	// Without a key every request creates, as before.
	create("", body)
	b.wantCount(t, 2, `SELECT count(*) FROM agent.saved_searches WHERE organization_id = $1`, b.org)

	// Twenty at once with one key: one saved search, one 201.
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() {
			res, err := b.send(req{method: http.MethodPost, path: "/v1/saved-searches", body: body,
				header: map[string]string{"Idempotency-Key": "twenty"}})
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = res.status
			if res.status == http.StatusConflict && res.header.Get("Retry-After") != "1" {
				t.Errorf("409 with Retry-After %q, want 1", res.header.Get("Retry-After"))
			}
		})
	}
	wg.Wait()
	if n := slices.Index(statuses, http.StatusCreated); n < 0 || slices.Index(statuses[n+1:], http.StatusCreated) >= 0 {
		t.Errorf("statuses %v, want exactly one 201", statuses)
	}
	for _, s := range statuses {
		if s != http.StatusCreated && s != http.StatusOK && s != http.StatusConflict {
			t.Errorf("statuses %v: want 201, 200 or 409 in_progress alone", statuses)
			break
		}
	}
	// Twenty concurrent creates with one key made one more.
	b.wantCount(t, 3, `SELECT count(*) FROM agent.saved_searches WHERE organization_id = $1`, b.org)
}

// TestKeyedProviderJobRegistrationRunsOnce: a registration's key replays
// it (200, Idempotent-Replayed, the same job) and refuses another body.
func TestKeyedProviderJobRegistrationRunsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	run := b.seedRun(b.org)
	register := func(key, providerJobID string) *response {
		return b.do(req{method: http.MethodPost, path: "/v1/provider-jobs",
			body:   map[string]any{"run_id": run, "provider": acme, "provider_job_id": providerJobID},
			header: map[string]string{"Idempotency-Key": key}})
	}
	first := register("reg-1", "job-1")
	var a, c struct{ ID uuid.UUID }
	first.decode(t, &a)
	if first.status != http.StatusCreated {
		t.Fatalf("first registration = %d %s, want 201", first.status, first.body)
	}
	again := register("reg-1", "job-1")
	again.decode(t, &c)
	if again.status != http.StatusOK || again.header.Get(api.HeaderIdempotentReplayed) != "true" || c.ID != a.ID {
		t.Errorf("repeat = %d (replayed %q) %s, want 200 replayed with job %s", again.status,
			again.header.Get(api.HeaderIdempotentReplayed), again.body, a.ID)
	}
	if res := register("reg-1", "job-2"); res.status != http.StatusUnprocessableEntity || res.problem(t).Code != api.CodeKeyReused {
		t.Errorf("another body under the key = %d %s, want 422 key_reused", res.status, res.body)
	}
	b.wantCount(t, 1, `SELECT count(*) FROM agent.provider_jobs WHERE organization_id = $1`, b.org)
	// One completed registration claim, on the plane.
	b.wantCount(t, 1, `SELECT count(*) FROM agent.idempotency_keys WHERE scope = 'surface.provider_job.register' AND status = 'completed'`)
}

// TestSavedSearchETagAndIfMatch: every answer carries the version as its
// ETag, and a change made from a stale version is refused with 412,
// changing nothing.
func TestSavedSearchETagAndIfMatch(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	path := "/v1/saved-searches/" + ss.ID.String()
	if res := b.do(req{method: http.MethodGet, path: path}); res.header.Get("ETag") != `"1"` {
		t.Fatalf("GET ETag = %q, want \"1\"", res.header.Get("ETag"))
	}
	patch := func(ifMatch string, body any) *response {
		return b.do(req{method: http.MethodPatch, path: path, body: body, header: map[string]string{"If-Match": ifMatch}})
	}
	if res := patch(`"1"`, map[string]any{"name": "first"}); res.status != http.StatusOK || res.header.Get("ETag") != `"2"` {
		t.Fatalf("PATCH If-Match \"1\" = %d (ETag %q) %s, want 200 with ETag \"2\"", res.status, res.header.Get("ETag"), res.body)
	}
	for _, tt := range []struct {
		what string
		req  req
	}{
		{"PATCH", req{method: http.MethodPatch, path: path, body: map[string]any{"name": "lost edit"}}},
		{"PATCH merge", req{method: http.MethodPatch, path: path, body: `{"name":"lost edit"}`,
			header: map[string]string{"Content-Type": api.MediaTypeMergePatch}}},
		{"PUT baseline", req{method: http.MethodPut, path: path + "/baseline", body: map[string]any{"items": []string{"x"}}}},
		{"DELETE", req{method: http.MethodDelete, path: path}},
	} {
		for _, stale := range []string{`"1"`, `W/"2"`, `"1", "3"`, `"two"`} {
			tt.req.header = mergeHeaders(tt.req.header, map[string]string{"If-Match": stale})
			res := b.do(tt.req)
			if res.status != http.StatusPreconditionFailed {
				t.Errorf("%s If-Match %s = %d %s, want 412", tt.what, stale, res.status, res.body)
				continue
			}
			p := res.problem(t)
			if p.Code != api.CodePreconditionFailed || p.CurrentVersion == nil || *p.CurrentVersion != 2 || res.header.Get("ETag") != `"2"` {
				t.Errorf("%s If-Match %s: problem %+v (ETag %q), want precondition_failed at version 2", tt.what, stale, p, res.header.Get("ETag"))
			}
		}
	}
	cur := b.do(req{method: http.MethodGet, path: path})
	var now savedsearch.SavedSearch
	cur.decode(t, &now)
	if now.Version != 2 || now.Name != "first" || len(now.Baseline.Items) != 0 {
		t.Errorf("after the refused changes: %+v, want version 2 unchanged", now)
	}
	// A list holding the current tag, and *, match.
	if res := b.do(req{method: http.MethodPut, path: path + "/baseline", body: map[string]any{"items": []string{"x"}},
		header: map[string]string{"If-Match": `"7", "2"`}}); res.status != http.StatusOK || res.header.Get("ETag") != `"3"` {
		t.Errorf("PUT baseline If-Match \"7\", \"2\" = %d %s, want 200 ETag \"3\"", res.status, res.body)
	}
	if res := b.do(req{method: http.MethodDelete, path: path, header: map[string]string{"If-Match": "*"}}); res.status != http.StatusNoContent {
		t.Errorf("DELETE If-Match * = %d %s, want 204", res.status, res.body)
	}
}

func mergeHeaders(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestConcurrentIfMatchLetsOneWriterWin: twenty PATCHes made from the same
// version, at once: exactly one applies, the others are 412.
func TestConcurrentIfMatchLetsOneWriterWin(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() {
			res, err := b.send(req{method: http.MethodPatch, path: "/v1/saved-searches/" + ss.ID.String(),
				body: map[string]any{"name": fmt.Sprintf("writer %d", i)}, header: map[string]string{"If-Match": `"1"`}})
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = res.status
		})
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusPreconditionFailed:
		default:
			t.Errorf("status %d among %v, want 200 or 412", s, statuses)
		}
	}
	if ok != 1 {
		t.Errorf("%d PATCHes from version 1 applied (%v), want exactly 1", ok, statuses)
	}
	b.wantCount(t, 2, `SELECT version FROM agent.saved_searches WHERE id = $1`, ss.ID)
}

// TestConcurrentMergePatchesWithoutIfMatchAllApply: 16 clients each send
// 25 merge patches without If-Match to one saved search, at once, with
// real commits. A request with no precondition must not fail one (RFC
// 9110): every one answers 200, and none is lost, since edits of the one
// row are serialized on it (each client's last value of its own filter is
// stored, and every patch bumped the version once).
func TestConcurrentMergePatchesWithoutIfMatchAllApply(t *testing.T) {
	t.Parallel()
	const clients, patches = 16, 25
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	path := "/v1/saved-searches/" + ss.ID.String()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
	)
	start := make(chan struct{})
	for c := range clients {
		wg.Go(func() {
			<-start
			for j := 1; j <= patches; j++ {
				res, err := b.send(req{method: http.MethodPatch, path: path,
					body:   fmt.Sprintf(`{"brief":{"filters":{"client%d":%d}}}`, c, j),
					header: map[string]string{"Content-Type": api.MediaTypeMergePatch}})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				statuses[res.status]++
				mu.Unlock()
				if res.status != http.StatusOK {
					t.Errorf("client %d patch %d = %d %s, want 200", c, j, res.status, res.body)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("statuses of %d merge patches: %v", clients*patches, statuses)
	var got savedsearch.SavedSearch
	b.do(req{method: http.MethodGet, path: path}).decode(t, &got)
	if got.Version != 1+clients*patches {
		t.Errorf("version %d after %d applied patches, want %d", got.Version, clients*patches, 1+clients*patches)
	}
	for c := range clients {
		if v := fmt.Sprint(got.Brief.Filters[fmt.Sprintf("client%d", c)]); v != fmt.Sprint(patches) {
			t.Errorf("filter client%d = %s, want %d: a patch was lost", c, v, patches)
		}
	}
}

// TestMergePatchAppliesRFC7396ToTheBrief: a merge patch removes the
// filter it sets to null, keeps the others, merges objects member by
// member; name and brief cannot be removed; other media types are 415.
func TestMergePatchAppliesRFC7396ToTheBrief(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	res := b.do(req{method: http.MethodPost, path: "/v1/saved-searches", body: map[string]any{
		"name":  "Berlin",
		"brief": map[string]any{"query": "postgres", "filters": map[string]any{"remote": true, "location": "Berlin", "salary": json.Number("12345678901234567890")}},
	}})
	var ss savedsearch.SavedSearch
	res.decode(t, &ss)
	path := "/v1/saved-searches/" + ss.ID.String()
	merge := func(body string, ct string) *response {
		return b.do(req{method: http.MethodPatch, path: path, body: body, header: map[string]string{"Content-Type": ct}})
	}
	res = merge(`{"brief":{"filters":{"remote":null,"level":"senior"}}}`, api.MediaTypeMergePatch)
	var got savedsearch.SavedSearch
	res.decode(t, &got)
	want := map[string]any{"location": "Berlin", "level": "senior", "salary": json.Number("12345678901234567890")}
	if res.status != http.StatusOK || got.Name != "Berlin" || got.Brief.Query != "postgres" || got.Version != 2 ||
		string(mustJSON(t, got.Brief.Filters)) != string(mustJSON(t, want)) {
		t.Errorf("merge patch = %d %s, want the brief merged: query kept, remote removed, level added, salary exact", res.status, res.body)
	}
	if res.header.Get("ETag") != `"2"` {
		t.Errorf("ETag = %q, want \"2\"", res.header.Get("ETag"))
	}
	for _, bad := range []string{`{"name":null}`, `{"brief":null}`, `{"brief":{"query":null}}`, `{"baseline":{"items":[]}}`, `{}`} {
		if res := merge(bad, api.MediaTypeMergePatch+"; charset=utf-8"); res.status != http.StatusBadRequest {
			t.Errorf("merge patch %s = %d %s, want 400", bad, res.status, res.body)
		}
	}
	for _, ct := range []string{"application/json-patch+json", "text/plain", "application/vnd.searchd+json"} {
		if res := merge(`{"name":"x"}`, ct); res.status != http.StatusUnsupportedMediaType || res.problem(t).Code != api.CodeUnsupportedMediaType {
			t.Errorf("PATCH with %s = %d %s, want 415", ct, res.status, res.body)
		}
	}
	// Refused patches leave the version.
	b.wantCount(t, 2, `SELECT version FROM agent.saved_searches WHERE id = $1`, ss.ID)
}

// TestCORSAllowsListedOrigins: a preflight from a listed origin is
// answered without a token, with the route's methods and the request
// headers a UI sends; answers (problems included) name the origin and
// expose the headers a UI reads; an unlisted origin, or a server with no
// list, gets no CORS headers.
func TestCORSAllowsListedOrigins(t *testing.T) {
	t.Parallel()
	const origin = "http://127.0.0.1:5173"
	b := setup(t, setupOpts{deps: func(d *api.Deps) { d.CORSOrigins = []string{origin} }})
	ss := b.seedSavedSearch(seedOpts{})
	path := "/v1/saved-searches/" + ss.ID.String() + "/start"
	preflight := func(b *bundle, from string) *response {
		return b.do(req{method: http.MethodOptions, path: path, noAuth: true, header: map[string]string{
			"Origin": from, "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization, content-type, idempotency-key, prefer",
		}})
	}
	res := preflight(b, origin)
	if res.status != http.StatusNoContent || res.header.Get("Access-Control-Allow-Origin") != origin {
		t.Fatalf("preflight = %d %v, want 204 allowing %s", res.status, res.header, origin)
	}
	for _, h := range []string{"Authorization", "Content-Type", "Idempotency-Key", "Prefer", "If-Match"} {
		if !strings.Contains(res.header.Get("Access-Control-Allow-Headers"), h) {
			t.Errorf("Access-Control-Allow-Headers = %q, want %s", res.header.Get("Access-Control-Allow-Headers"), h)
		}
	}
	if !strings.Contains(res.header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("Access-Control-Allow-Methods = %q, want POST", res.header.Get("Access-Control-Allow-Methods"))
	}
	res = b.do(req{method: http.MethodPost, path: path, header: map[string]string{"Origin": origin, "Idempotency-Key": "cors"}})
	if res.status != http.StatusCreated || res.header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("start from %s = %d, Allow-Origin %q", origin, res.status, res.header.Get("Access-Control-Allow-Origin"))
	}
	expose := strings.ToLower(res.header.Get("Access-Control-Expose-Headers"))
	for _, h := range []string{"location", "retry-after", "idempotent-replayed", "etag", "x-request-id", "preference-applied"} {
		if !strings.Contains(expose, h) {
			t.Errorf("Access-Control-Expose-Headers = %q, want %s", expose, h)
		}
	}
	res = b.do(req{method: http.MethodGet, path: "/v1/runs", noAuth: true, header: map[string]string{"Origin": origin}})
	if res.status != http.StatusUnauthorized || res.header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("401 to %s: %d, Allow-Origin %q; want a 401 the page can read", origin, res.status, res.header.Get("Access-Control-Allow-Origin"))
	}
	if res := preflight(b, "http://127.0.0.1:6666"); res.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from an unlisted origin allowed: %v", res.header)
	}
	closed := setup(t, setupOpts{})
	if res := preflight(closed, origin); res.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a server without SEARCHD_CORS_ORIGINS allowed %s: %v", origin, res.header)
	}
	if _, err := api.New(api.Deps{Ready: readiness.Pool(b.pool), SavedSearches: savedsearch.NewStore(b.pool), CORSOrigins: []string{"http://*.example.com"}}); err == nil {
		t.Error("api.New accepted a wildcard origin pattern")
	}
}

// TestWrongMethodAnswers405WithAllow: a known /v1 path with another method
// is 405 with Allow naming its methods (HEAD beside GET), with or without
// a token; an unknown path stays 404.
func TestWrongMethodAnswers405WithAllow(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, tt := range []struct {
		method, path string
		allow        []string
	}{
		{http.MethodDelete, "/v1/runs", []string{"GET", "HEAD", "POST"}},
		{http.MethodPut, "/v1/saved-searches", []string{"GET", "HEAD", "POST"}},
		{http.MethodPost, "/v1/saved-searches/" + uuid.NewString(), []string{"DELETE", "GET", "HEAD", "PATCH"}},
		{http.MethodGet, "/v1/saved-searches/" + uuid.NewString() + "/start", []string{"POST"}},
		{http.MethodDelete, "/healthz", []string{"GET", "HEAD"}},
	} {
		for _, noAuth := range []bool{false, true} {
			res := b.do(req{method: tt.method, path: tt.path, noAuth: noAuth})
			if res.status != http.StatusMethodNotAllowed || res.problem(t).Code != api.CodeMethodNotAllowed {
				t.Errorf("%s %s = %d %s, want 405", tt.method, tt.path, res.status, res.body)
				continue
			}
			allow := strings.Split(strings.ReplaceAll(res.header.Get("Allow"), " ", ""), ",")
			for _, m := range tt.allow {
				if !slices.Contains(allow, m) {
					t.Errorf("%s %s: Allow = %q, want %s in it", tt.method, tt.path, res.header.Get("Allow"), m)
				}
			}
		}
	}
	if res := b.do(req{method: http.MethodGet, path: "/v1/nothing"}); res.status != http.StatusNotFound {
		t.Errorf("GET /v1/nothing = %d, want 404", res.status)
	}
}

// TestHeadAnswersEveryGetRoute: HEAD on every GET route answers what GET
// answers, status and Content-Type, without a body.
func TestHeadAnswersEveryGetRoute(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	n := 0
	for _, r := range w.api.Handler().(*echo.Echo).Routes() {
		if r.Method != http.MethodGet {
			continue
		}
		n++
		path := w.url(route{r.Method, r.Path})
		get := w.do(req{method: http.MethodGet, path: path})
		hr, err := http.NewRequest(http.MethodHead, w.server.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Authorization", "Bearer "+w.token)
		res, err := w.server.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != get.status || len(body) != 0 ||
			res.Header.Get("Content-Type") != get.header.Get("Content-Type") {
			t.Errorf("HEAD %s = %d %q (%d body bytes), GET = %d %q; want the same status and type, no body",
				path, res.StatusCode, res.Header.Get("Content-Type"), len(body), get.status, get.header.Get("Content-Type"))
		}
	}
	if n < 10 {
		t.Fatalf("only %d GET routes: the enumeration is broken", n)
	}
}

// TestIntegralNumbersAreIntegers: max_results 10.0 or 1e1 is the integer 10
// (JSON Schema's integer), 10.5 is refused.
func TestIntegralNumbersAreIntegers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	for i, lit := range []string{"10.0", "1e1", "1.0E+1", "100e-1"} {
		res := b.start(ss.ID, fmt.Sprintf("int-%d", i), `{"max_results":`+lit+`}`)
		var body startAnswer
		res.decode(t, &body)
		if res.status != http.StatusCreated || body.Run.Options["max_results"] != float64(10) {
			t.Errorf("max_results %s = %d %s, want 201 with max_results 10", lit, res.status, res.body)
		}
	}
	// Written differently, the same request: a replay.
	if res := b.start(ss.ID, "int-0", `{"max_results":10}`); res.status != http.StatusOK {
		t.Errorf("max_results 10 under the key of 10.0 = %d %s, want 200 (the same request)", res.status, res.body)
	}
	for _, lit := range []string{"10.5", "1e-1", "1e30"} {
		if res := b.start(ss.ID, "bad-"+lit, `{"max_results":`+lit+`}`); res.status != http.StatusBadRequest {
			t.Errorf("max_results %s = %d %s, want 400", lit, res.status, res.body)
		}
	}
}

// TestRefusedTokenChallengesInvalidToken: a 401 for a token that was sent
// and refused says error="invalid_token" (RFC 6750 §3.1); one for no
// token does not.
func TestRefusedTokenChallengesInvalidToken(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	res := b.do(req{method: http.MethodGet, path: "/v1/runs", header: map[string]string{"Authorization": "Bearer not.a.token"}})
	if res.status != http.StatusUnauthorized || res.header.Get("WWW-Authenticate") != `Bearer realm="searchd", error="invalid_token"` {
		t.Errorf("bad token: %d, WWW-Authenticate %q; want 401 with error=\"invalid_token\"", res.status, res.header.Get("WWW-Authenticate"))
	}
	expired, err := auth.SignToken(testSecret, b.org, "x", time.Now().Add(-2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	res = b.do(req{method: http.MethodGet, path: "/v1/runs", header: bearer(expired)})
	if !strings.Contains(res.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("expired token: WWW-Authenticate %q, want error=\"invalid_token\"", res.header.Get("WWW-Authenticate"))
	}
	// Issue 36: every credential sent and refused, however it fails.
	for name, value := range map[string]string{
		"a token over 8 KiB": "Bearer " + strings.Repeat("a", auth.MaxTokenLen+1),
		"another scheme":     "Basic YWxpY2U6c2VjcmV0",
		"Bearer alone":       "Bearer",
	} {
		res = b.do(req{method: http.MethodGet, path: "/v1/runs", header: map[string]string{"Authorization": value}})
		if res.status != http.StatusUnauthorized || !strings.Contains(res.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("%s: %d, WWW-Authenticate %q; want 401 with error=\"invalid_token\"", name, res.status, res.header.Get("WWW-Authenticate"))
		}
	}
	res = b.do(req{method: http.MethodGet, path: "/v1/runs", noAuth: true})
	if got := res.header.Get("WWW-Authenticate"); got != `Bearer realm="searchd"` {
		t.Errorf("no token: WWW-Authenticate %q, want the bare Bearer challenge", got)
	}
}

// TestProblemTypesResolveToPagesSearchdServes: a problem's type, resolved
// against the request URL, is a page searchd serves about that code.
func TestProblemTypesResolveToPagesSearchdServes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	res := b.do(req{method: http.MethodGet, path: "/v1/runs/" + uuid.NewString()})
	p := res.problem(t)
	if !strings.HasPrefix(p.Type, "/problems/") {
		t.Fatalf("type = %q, want a path on searchd", p.Type)
	}
	page := b.do(req{method: http.MethodGet, path: p.Type, noAuth: true})
	if page.status != http.StatusOK || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page.body), "<code>not_found</code>") || !strings.Contains(string(page.body), "What to do") {
		t.Errorf("GET %s = %d %q %.200s, want an HTML page documenting not_found", p.Type, page.status, page.header.Get("Content-Type"), page.body)
	}
	index := b.do(req{method: http.MethodGet, path: "/problems", noAuth: true})
	for _, code := range []string{api.CodeInProgress, api.CodeKeyReused, api.CodePreconditionFailed, api.CodeUnauthorized} {
		if !strings.Contains(string(index.body), `id="`+code+`"`) {
			t.Errorf("/problems documents no %s", code)
		}
	}
	if res := b.do(req{method: http.MethodGet, path: "/problems/no_such_code", noAuth: true}); res.status != http.StatusNotFound {
		t.Errorf("GET /problems/no_such_code = %d, want 404", res.status)
	}
}

// TestRunsAnswerTheirActorAndKey: a Run says who started it and with which
// Idempotency-Key, on the start and on every read.
func TestRunsAnswerTheirActorAndKey(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	res := b.start(ss.ID, "audit-key", nil)
	var started startAnswer
	res.decode(t, &started)
	read := b.do(req{method: http.MethodGet, path: "/v1/runs/" + started.Run.ID.String()})
	var got struct {
		CreatedBy      *string `json:"created_by"`
		IdempotencyKey string  `json:"idempotency_key"`
	}
	read.decode(t, &got)
	for what, r := range map[string]struct {
		by  *string
		key string
	}{"start": {started.Run.CreatedBy, started.Run.IdempotencyKey}, "read": {got.CreatedBy, got.IdempotencyKey}} {
		if r.by == nil || *r.by != "tester" || r.key != "audit-key" {
			t.Errorf("%s: created_by %v, idempotency_key %q; want tester and audit-key", what, r.by, r.key)
		}
	}
}

// TestArchivedSavedSearchesAreListedAndRead: ?archived=true lists the
// archived saved searches and reads one, whose snapshots and Runs stay
// readable; without it they are gone from the list and the read.
func TestArchivedSavedSearchesAreListedAndRead(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	live := b.seedSavedSearch(seedOpts{name: "live"})
	gone := b.seedSavedSearch(seedOpts{name: "gone"})
	b.start(gone.ID, "before-archive", nil)
	if res := b.do(req{method: http.MethodDelete, path: "/v1/saved-searches/" + gone.ID.String()}); res.status != http.StatusNoContent {
		t.Fatalf("archive = %d", res.status)
	}
	var page struct {
		Items []savedsearch.SavedSearch `json:"items"`
	}
	b.do(req{method: http.MethodGet, path: "/v1/saved-searches"}).decode(t, &page)
	if len(page.Items) != 1 || page.Items[0].ID != live.ID || page.Items[0].ArchivedAt != nil {
		t.Errorf("live list = %+v, want the live one alone", page.Items)
	}
	b.do(req{method: http.MethodGet, path: "/v1/saved-searches?archived=true"}).decode(t, &page)
	if len(page.Items) != 1 || page.Items[0].ID != gone.ID || page.Items[0].ArchivedAt == nil {
		t.Errorf("archived list = %+v, want the archived one with archived_at", page.Items)
	}
	path := "/v1/saved-searches/" + gone.ID.String()
	if res := b.do(req{method: http.MethodGet, path: path}); res.status != http.StatusNotFound {
		t.Errorf("GET archived without ?archived=true = %d, want 404", res.status)
	}
	res := b.do(req{method: http.MethodGet, path: path + "?archived=true"})
	var ss savedsearch.SavedSearch
	res.decode(t, &ss)
	if res.status != http.StatusOK || ss.ArchivedAt == nil || ss.Name != "gone" || res.header.Get("ETag") != `"2"` {
		t.Errorf("GET archived with ?archived=true = %d %s, want it with archived_at and ETag \"2\"", res.status, res.body)
	}
	var snaps, runsPage struct{ Items []json.RawMessage }
	b.do(req{method: http.MethodGet, path: path + "/snapshots"}).decode(t, &snaps)
	b.do(req{method: http.MethodGet, path: "/v1/runs?saved_search_id=" + gone.ID.String()}).decode(t, &runsPage)
	if len(snaps.Items) != 1 || len(runsPage.Items) != 1 {
		t.Errorf("archived saved search: %d snapshots, %d Runs; want 1 each", len(snaps.Items), len(runsPage.Items))
	}
	other := b.tokenFor(uuid.New(), "intruder")
	if res := b.do(req{method: http.MethodGet, path: path + "?archived=true", header: bearer(other)}); res.status != http.StatusNotFound {
		t.Errorf("another organization reads the archived saved search: %d", res.status)
	}
	if res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches?archived=maybe"}); res.status != http.StatusBadRequest {
		t.Errorf("?archived=maybe = %d, want 400", res.status)
	}
}

// TestProviderJobDropsAreListedPerJob: a job's dropped deliveries read
// over HTTP by its organization, and by nobody else.
func TestProviderJobDropsAreListedPerJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	job := b.seedJob("job-with-drops")
	d := delivery{jobID: pathOf(job), deliveryID: "evt-1", body: callbackBody(job.ProviderJobID, "running", nil)}
	if s, _ := b.callback(d).answer(t); s != "accepted" {
		t.Fatalf("first delivery %s, want accepted", s)
	}
	if _, reason := b.callback(d).answer(t); reason != "duplicate" {
		t.Fatalf("redelivery reason %q, want duplicate", reason)
	}
	path := "/v1/provider-jobs/" + job.ID.String() + "/drops"
	res := b.do(req{method: http.MethodGet, path: path})
	var drops struct {
		Items []struct {
			DeliveryID string `json:"delivery_id"`
			Reason     string `json:"reason"`
		} `json:"items"`
	}
	res.decode(t, &drops)
	if res.status != http.StatusOK || len(drops.Items) != 1 || drops.Items[0].DeliveryID != "evt-1" || drops.Items[0].Reason != "duplicate" {
		t.Errorf("GET %s = %d %s, want the one duplicate", path, res.status, res.body)
	}
	other := b.tokenFor(uuid.New(), "intruder")
	if res := b.do(req{method: http.MethodGet, path: path, header: bearer(other)}); res.status != http.StatusNotFound {
		t.Errorf("another organization reads the drops: %d %s", res.status, res.body)
	}
}
