package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/savedsearch"
)

func TestIdempotencyKeyProblems(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	tests := []struct {
		name   string
		header http.Header
		code   string
	}{
		{"missing", http.Header{}, "missing_idempotency_key"},
		{"empty", http.Header{"Idempotency-Key": {""}}, "invalid_idempotency_key"},
		{"too long", http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}, "invalid_idempotency_key"},
		{"not ASCII", http.Header{"Idempotency-Key": {"clé"}}, "invalid_idempotency_key"},
		{"control character", http.Header{"Idempotency-Key": {"a\tb"}}, "invalid_idempotency_key"},
		{"unterminated quote", http.Header{"Idempotency-Key": {`"abc`}}, "invalid_idempotency_key"},
		{"empty quoted", http.Header{"Idempotency-Key": {`""`}}, "invalid_idempotency_key"},
		{"quoted with parameters", http.Header{"Idempotency-Key": {`"abc";v=1`}}, "invalid_idempotency_key"},
		{"two headers", http.Header{"Idempotency-Key": {"a", "b"}}, "invalid_idempotency_key"},
		// One line holding a list: what a proxy may make of two lines
		// (RFC 9110 §5.3), and what the draft's structured field refuses.
		{"a list in one header", http.Header{"Idempotency-Key": {"a1, a2"}}, "invalid_idempotency_key"},
		{"a list without spaces", http.Header{"Idempotency-Key": {"a1,a2"}}, "invalid_idempotency_key"},
		{"a list of strings", http.Header{"Idempotency-Key": {`"a1", "a2"`}}, "invalid_idempotency_key"},
	}
	for _, tt := range tests {
		for _, path := range []string{"/v1/saved-searches/" + ss.ID.String() + "/start", "/v1/runs"} {
			hr, _ := http.NewRequest(http.MethodPost, b.server.URL+path,
				strings.NewReader(`{"kind":"definition","name":"n"}`))
			hr.Header = tt.header.Clone()
			hr.Header.Set("Authorization", "Bearer "+b.token)
			hr.Header.Set("Content-Type", "application/json")
			res := b.raw(hr)
			if res.status != http.StatusBadRequest || res.problem(t).Code != tt.code {
				t.Errorf("%s on %s: %d %s, want 400 %s", tt.name, path, res.status, res.body, tt.code)
			}
		}
	}
	b.wantCount(t, 0, `SELECT count(*) FROM agent.runs`)
}

func TestMalformedJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	start := "/v1/saved-searches/" + ss.ID.String() + "/start"
	tests := []struct {
		method, path, body string
	}{
		{http.MethodPost, "/v1/saved-searches", `{"name": "x",`},
		{http.MethodPost, "/v1/saved-searches", `{"name": "x"} {"name": "y"}`},
		{http.MethodPost, "/v1/saved-searches", `[{"name": "x"}]`},
		{http.MethodPost, "/v1/saved-searches", `"a string"`},
		{http.MethodPost, "/v1/saved-searches", `null`},
		{http.MethodPost, "/v1/saved-searches", "{\"name\": \"\xff\xfe\"}"},
		{http.MethodPost, "/v1/saved-searches", ``},
		{http.MethodPost, "/v1/saved-searches", `{'name': 'single quotes'}`},
		{http.MethodPatch, "/v1/saved-searches/" + ss.ID.String(), `{"name": "x"`},
		{http.MethodPut, "/v1/saved-searches/" + ss.ID.String() + "/baseline", `{"items": [1,]}`},
		{http.MethodPost, start, `{"max_results": 10`},
		{http.MethodPost, start, `nul`},
		{http.MethodPost, "/v1/runs", `{"kind": "definition", "name": "n", "input": {"a": tru}}`},
	}
	for _, tt := range tests {
		res := b.do(req{method: tt.method, path: tt.path, body: tt.body, header: map[string]string{"Idempotency-Key": "k"}})
		res.wantProblem(t, http.StatusBadRequest, "malformed_json", "%s %s %q", tt.method, tt.path, tt.body)
	}
}

func TestValidationFailedNamesTheFields(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	id := ss.ID.String()
	deep := strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)
	tests := []struct {
		name         string
		method, path string
		body         string
		fields       []string
	}{
		{"name missing", http.MethodPost, "/v1/saved-searches", `{"brief": {"query": "q"}}`, []string{"name"}},
		{"name empty, query missing", http.MethodPost, "/v1/saved-searches", `{"name": "", "brief": {}}`, []string{"name", "brief.query"}},
		{"name too long", http.MethodPost, "/v1/saved-searches", `{"name": "` + strings.Repeat("é", 201) + `", "brief": {"query": "q"}}`, []string{"name"}},
		{"query too long", http.MethodPost, "/v1/saved-searches", `{"name": "n", "brief": {"query": "` + strings.Repeat("q", 2001) + `"}}`, []string{"brief.query"}},
		{"empty item", http.MethodPost, "/v1/saved-searches", `{"name": "n", "brief": {"query": "q"}, "baseline": {"items": ["a", "b", "c", ""]}}`, []string{"baseline.items[3]"}},
		{"item too long", http.MethodPut, "/v1/saved-searches/" + id + "/baseline", `{"items": ["` + strings.Repeat("i", 201) + `"]}`, []string{"items[0]"}},
		{"too many items", http.MethodPut, "/v1/saved-searches/" + id + "/baseline", `{"items": [` + strings.TrimSuffix(strings.Repeat(`"x",`, 10001), ",") + `]}`, []string{"items"}},
		{"item not a string", http.MethodPut, "/v1/saved-searches/" + id + "/baseline", `{"items": ["a", 2]}`, []string{"items[1]"}},
		{"unknown field", http.MethodPost, "/v1/saved-searches", `{"name": "n", "brief": {"query": "q", "extra": 1}}`, []string{"brief.extra"}},
		{"field in the wrong case", http.MethodPost, "/v1/saved-searches", `{"Name": "n", "brief": {"query": "q"}}`, []string{"Name"}},
		{"duplicate field", http.MethodPost, "/v1/saved-searches", `{"name": "a", "name": "b", "brief": {"query": "q"}}`, []string{"name"}},
		{"filters not an object", http.MethodPost, "/v1/saved-searches", `{"name": "n", "brief": {"query": "q", "filters": [1]}}`, []string{"brief.filters"}},
		{"NUL in a string", http.MethodPost, "/v1/saved-searches", `{"name": "a\u0000b", "brief": {"query": "q"}}`, []string{"name"}},
		{"NUL in a filter key", http.MethodPost, "/v1/saved-searches", `{"name": "n", "brief": {"query": "q", "filters": {"k\u0000": 1}}}`, []string{"brief.filters.k\x00"}},
		{"nesting too deep", http.MethodPost, "/v1/saved-searches", `{"name": "n", "brief": {"query": "q", "filters": ` + deep + `}}`, nil},
		{"number out of range", http.MethodPost, "/v1/saved-searches", `{"name": "n", "brief": {"query": "q", "filters": {"x": 1e999}}}`, []string{"brief.filters.x"}},
		{"no name nor brief", http.MethodPatch, "/v1/saved-searches/" + id, `{}`, []string{"name", "brief"}},
		{"patch name empty", http.MethodPatch, "/v1/saved-searches/" + id, `{"name": ""}`, []string{"name"}},
		{"max_results zero", http.MethodPost, "/v1/saved-searches/" + id + "/start", `{"max_results": 0}`, []string{"max_results"}},
		{"max_results too big", http.MethodPost, "/v1/saved-searches/" + id + "/start", `{"max_results": 1001}`, []string{"max_results"}},
		{"max_results fractional", http.MethodPost, "/v1/saved-searches/" + id + "/start", `{"max_results": 1.5}`, []string{"max_results"}},
		{"max_results a string", http.MethodPost, "/v1/saved-searches/" + id + "/start", `{"max_results": "10"}`, []string{"max_results"}},
		{"note too long", http.MethodPost, "/v1/saved-searches/" + id + "/start", `{"note": "` + strings.Repeat("n", 501) + `"}`, []string{"note"}},
		{"kind unknown", http.MethodPost, "/v1/runs", `{"kind": "saved_search", "name": "n"}`, []string{"kind"}},
		{"name missing", http.MethodPost, "/v1/runs", `{"kind": "definition"}`, []string{"name"}},
		{"input not an object", http.MethodPost, "/v1/runs", `{"kind": "definition", "name": "n", "input": [1]}`, []string{"input"}},
	}
	for _, tt := range tests {
		res := b.do(req{method: tt.method, path: tt.path, body: tt.body, header: map[string]string{"Idempotency-Key": "v"}})
		if res.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tt.name, res.status, res.body)
			continue
		}
		p := res.problem(t)
		var fields []string
		for _, fe := range p.Errors {
			fields = append(fields, fe.Field)
			if fe.Message == "" {
				t.Errorf("%s: field %q has no message", tt.name, fe.Field)
			}
		}
		if p.Code != "validation_failed" || len(p.Errors) == 0 {
			t.Errorf("%s: %s, want validation_failed with errors", tt.name, res.body)
			continue
		}
		if tt.fields != nil && !slices.Equal(fields, tt.fields) {
			t.Errorf("%s: fields %q, want %q", tt.name, fields, tt.fields)
		}
	}
	// Query parameters are fields too.
	for _, q := range []string{"/v1/runs?limit=0", "/v1/runs?limit=201", "/v1/runs?limit=x",
		"/v1/runs?saved_search_id=nope", "/v1/runs?cursor=bogus", "/v1/saved-searches?cursor=%00", "/v1/saved-searches?limit=-1"} {
		res := b.do(req{method: http.MethodGet, path: q})
		res.wantProblem(t, http.StatusBadRequest, "validation_failed", "GET %s", q)
	}
	b.wantCount(t, 0, `SELECT count(*) FROM agent.runs`)
}

// TestListCursorsAreReadByTheOneDecoder sends every API list cursors in
// the cursors' own format that searchd did not mint: a valid instant with
// a MAC of zeros (a forgery of a client that knows the format), the
// unsigned version-1 format of before the upgrade, an instant PostgreSQL
// cannot hold (before 4713 BC) and ones just past the range the decoder
// takes. Each is refused as the cursor (400 validation_failed naming the
// field "cursor"), before any SQL, as the console refuses it.
func TestListCursorsAreReadByTheOneDecoder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	for _, list := range []string{"/v1/saved-searches", "/v1/runs", "/v1/saved-searches/" + ss.ID.String() + "/snapshots",
		"/v1/saved-searches/" + ss.ID.String() + "/occurrences"} {
		for _, c := range []struct{ name, cursor string }{
			{"a forged MAC at a valid instant", forgedCursor(2, time.Now(), uuid.New())},
			{"a version-1 cursor", forgedCursor(1, time.Now(), uuid.New())},
			{"an instant before 4713 BC", forgedCursor(2, time.UnixMicro(-211_000_000_000_000_000), uuid.New())},
			{"one microsecond before the first instant", forgedCursor(2, keyset.MinInstant.Add(-time.Microsecond), uuid.New())},
			{"one microsecond after the last instant", forgedCursor(2, keyset.MaxInstant.Add(time.Microsecond), uuid.New())},
			{"the first instant", forgedCursor(2, keyset.MinInstant, uuid.New())},
		} {
			res := b.do(req{method: http.MethodGet, path: list + "?cursor=" + c.cursor})
			if res.status != http.StatusBadRequest {
				t.Errorf("GET %s with %s = %d %s, want 400", list, c.name, res.status, res.body)
				continue
			}
			if p := res.problem(t); p.Code != "validation_failed" || len(p.Errors) != 1 || p.Errors[0].Field != "cursor" {
				t.Errorf("GET %s with %s = %s, want validation_failed naming the cursor", list, c.name, res.body)
			}
		}
	}
}

// forgedCursor writes a cursor as a client that knows the format but not
// the key would: version v, the instant and id, and for version 2 a MAC
// of zeros (version 1 had none).
func forgedCursor(v byte, at time.Time, id uuid.UUID) string {
	b := binary.BigEndian.AppendUint64([]byte{v}, uint64(at.UnixMicro()))
	b = append(b, id[:]...)
	if v == 2 {
		b = append(b, make([]byte, 16)...)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestUnauthorized(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := uuid.New()
	now := time.Now()
	sign := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		t.Helper()
		tok, err := jwt.NewWithClaims(method, claims).SignedString(key)
		if err != nil {
			t.Fatalf("signing: %v", err)
		}
		return tok
	}
	valid := jwt.MapClaims{"org_id": org.String(), "exp": now.Add(time.Hour).Unix()}
	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := maps.Clone(valid)
		edit(c)
		return c
	}
	// An unsigned token that names alg none, built by hand.
	enc := base64.RawURLEncoding.EncodeToString
	algNone := enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(mustJSON(t, valid)) + "."

	tests := []struct {
		name   string
		header string
	}{
		{"no header", ""},
		{"not bearer", "Basic dXNlcjpwYXNz"},
		{"bearer without token", "Bearer "},
		{"garbage", "Bearer not.a.jwt"},
		{"expired", "Bearer " + sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }))},
		{"no exp", "Bearer " + sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { delete(c, "exp") }))},
		{"other secret", "Bearer " + sign(jwt.SigningMethodHS256, []byte("another-secret-another-secret-0123456"), valid)},
		{"alg none", "Bearer " + algNone},
		{"other algorithm, same secret", "Bearer " + sign(jwt.SigningMethodHS512, testSecret, valid)},
		{"no org_id", "Bearer " + sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { delete(c, "org_id") }))},
		{"org_id not a UUID", "Bearer " + sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { c["org_id"] = "acme" }))},
		{"org_id the nil UUID", "Bearer " + sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { c["org_id"] = uuid.Nil.String() }))},
		{"org_id a number", "Bearer " + sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { c["org_id"] = 42 }))},
		{"sub with NUL", "Bearer " + sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { c["sub"] = "a\x00b" }))},
		{"sub too long", "Bearer " + sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { c["sub"] = strings.Repeat("s", 256) }))},
		{"not yet valid", "Bearer " + sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() }))},
	}
	for _, tt := range tests {
		res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches", noAuth: tt.header == "",
			header: map[string]string{"Authorization": tt.header}})
		res.wantProblem(t, http.StatusUnauthorized, "unauthorized", "%s", tt.name)
		if res.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: no WWW-Authenticate header", tt.name)
		}
	}
	// The control: the same claims, properly signed, pass; so does a
	// lower-case scheme.
	res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches",
		header: map[string]string{"Authorization": "bearer " + sign(jwt.SigningMethodHS256, testSecret, valid)}})
	if res.status != http.StatusOK {
		t.Errorf("valid token = %d %s, want 200", res.status, res.body)
	}
	// Every /v1 route needs the token.
	for _, r := range []req{
		{method: http.MethodPost, path: "/v1/saved-searches", body: `{}`},
		{method: http.MethodGet, path: "/v1/saved-searches/" + uuid.NewString()},
		{method: http.MethodPatch, path: "/v1/saved-searches/" + uuid.NewString(), body: `{}`},
		{method: http.MethodDelete, path: "/v1/saved-searches/" + uuid.NewString()},
		{method: http.MethodPut, path: "/v1/saved-searches/" + uuid.NewString() + "/baseline", body: `{}`},
		{method: http.MethodPost, path: "/v1/saved-searches/" + uuid.NewString() + "/start"},
		{method: http.MethodGet, path: "/v1/saved-searches/" + uuid.NewString() + "/snapshots"},
		{method: http.MethodPost, path: "/v1/runs", body: `{}`},
		{method: http.MethodGet, path: "/v1/runs"},
		{method: http.MethodGet, path: "/v1/runs/" + uuid.NewString()},
		{method: http.MethodGet, path: "/v1/snapshots/" + uuid.NewString()},
	} {
		r.noAuth = true
		if res := b.do(r); res.status != http.StatusUnauthorized {
			t.Errorf("%s %s without a token = %d, want 401", r.method, r.path, res.status)
		}
	}
}

// TestNotFoundSaysWhatIsMissing: a 404 answers the detail of the domain
// error that refused, naming what the organization does not have, and for
// a list of snapshots that is the saved search, not a snapshot.
func TestNotFoundSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	unknown := "/v1/saved-searches/" + uuid.NewString()
	for _, tt := range []struct {
		r      req
		detail string
	}{
		{req{method: http.MethodGet, path: unknown}, "no such saved search in your organization"},
		{req{method: http.MethodPatch, path: unknown, body: map[string]any{"name": "x"}}, "no such saved search in your organization"},
		{req{method: http.MethodGet, path: unknown + "/snapshots"}, "no such saved search in your organization"},
		{req{method: http.MethodPost, path: unknown + "/start", header: map[string]string{"Idempotency-Key": "gone"}},
			"no such saved search in your organization"},
		{req{method: http.MethodGet, path: "/v1/snapshots/" + uuid.NewString()}, "no such snapshot in your organization"},
		{req{method: http.MethodGet, path: "/v1/runs/" + uuid.NewString()}, "no such run in your organization"},
		{req{method: http.MethodGet, path: "/v1/provider-jobs/" + uuid.NewString()}, "no such provider job in your organization"},
		{req{method: http.MethodGet, path: "/v1/saved-searches/" + ss.ID.String() + "/schedule"}, "this saved search has no schedule"},
		{req{method: http.MethodPut, path: unknown + "/schedule", body: map[string]any{"interval_seconds": 3600}},
			"no such saved search in your organization (a schedule is set on a live one)"},
	} {
		res := b.do(tt.r)
		if p := res.problem(t); res.status != http.StatusNotFound || p.Code != "not_found" || p.Detail != tt.detail ||
			p.Type != "/problems/not_found" || p.Title != "Not found" {
			t.Errorf("%s %s = %d %s, want 404 not_found saying %q", tt.r.method, tt.r.path, res.status, res.body, tt.detail)
		}
	}
}

func TestTenantIsolationOnEveryRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// Organization A owns a saved search, a snapshot and two Runs.
	ss := b.seedSavedSearch(seedOpts{})
	var started, direct startResult
	b.start(ss.ID, "tenant", nil).decode(t, &started)
	b.startDirect("tenant-direct", map[string]any{"kind": "definition", "name": "d"}).decode(t, &direct)
	aToken := b.token

	// Organization B sees none of it, on every route.
	b.token = b.tokenFor(uuid.New(), "intruder")
	ssPath := "/v1/saved-searches/" + ss.ID.String()
	for _, r := range []req{
		{method: http.MethodGet, path: ssPath},
		{method: http.MethodPatch, path: ssPath, body: map[string]any{"name": "stolen"}},
		{method: http.MethodPut, path: ssPath + "/baseline", body: map[string]any{"items": []string{}}},
		{method: http.MethodDelete, path: ssPath},
		{method: http.MethodPost, path: ssPath + "/start", header: map[string]string{"Idempotency-Key": "tenant"}},
		{method: http.MethodGet, path: ssPath + "/snapshots"},
		{method: http.MethodGet, path: "/v1/snapshots/" + started.Snapshot.ID.String()},
		{method: http.MethodGet, path: "/v1/runs/" + started.Run.ID.String()},
		{method: http.MethodGet, path: "/v1/runs/" + direct.Run.ID.String()},
	} {
		res := b.do(r)
		res.wantProblem(t, http.StatusNotFound, "not_found", "another organization's %s %s", r.method, r.path)
	}
	for _, path := range []string{"/v1/saved-searches", "/v1/runs", "/v1/runs?saved_search_id=" + ss.ID.String()} {
		var page struct{ Items []json.RawMessage }
		b.do(req{method: http.MethodGet, path: path}).decode(t, &page)
		if len(page.Items) != 0 {
			t.Errorf("another organization's GET %s lists %d items, want 0", path, len(page.Items))
		}
	}
	// B's own start with A's key is B's own Run.
	mine := b.seedSavedSearch(seedOpts{org: principalOrg(t, b.token)})
	if res := b.start(mine.ID, "tenant", nil); res.status != http.StatusCreated {
		t.Errorf("B's start with A's key = %d %s, want 201", res.status, res.body)
	}

	// Nothing B tried changed A's saved search.
	b.token = aToken
	var after savedsearch.SavedSearch
	b.do(req{method: http.MethodGet, path: ssPath}).decode(t, &after)
	if after.Name != ss.Name || after.Version != ss.Version {
		t.Errorf("A's saved search after B's attempts = %+v, want it unchanged", after)
	}
}

// principalOrg reads the org_id of a token the tests signed.
func principalOrg(t *testing.T, token string) uuid.UUID {
	t.Helper()
	var c auth.Claims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		t.Fatal(err)
	}
	return uuid.MustParse(c.OrgID)
}

func TestNotFoundForMalformedPathIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, path := range []string{"/v1/saved-searches/42", "/v1/runs/not-a-uuid", "/v1/snapshots/%00",
		"/v1/saved-searches/zz/snapshots", "/nope", "/v1/nope"} {
		res := b.do(req{method: http.MethodGet, path: path})
		res.wantProblem(t, http.StatusNotFound, "not_found", "GET %s", path)
	}
	res := b.do(req{method: http.MethodDelete, path: "/healthz"})
	res.wantProblem(t, http.StatusMethodNotAllowed, "method_not_allowed", "DELETE /healthz")
}

func TestPayloadTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{deps: func(d *api.Deps) { d.MaxBodyBytes = 1024 }})
	big := `{"name": "n", "brief": {"query": "` + strings.Repeat("q", 2000) + `"}}`
	res := b.do(req{method: http.MethodPost, path: "/v1/saved-searches", body: big})
	res.wantProblem(t, http.StatusRequestEntityTooLarge, "payload_too_large", "a 2 KiB body with a known length")
	// Without a Content-Length the limit holds while reading.
	hr, _ := http.NewRequest(http.MethodPost, b.server.URL+"/v1/saved-searches", io.MultiReader(strings.NewReader(big)))
	hr.ContentLength = -1
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+b.token)
	if res := b.raw(hr); res.status != http.StatusRequestEntityTooLarge || res.problem(t).Code != "payload_too_large" {
		t.Errorf("a chunked 2 KiB body = %d %s, want 413 payload_too_large", res.status, res.body)
	}
}

func TestUnsupportedMediaType(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	body := `{"name": "n", "brief": {"query": "q"}}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", "json", ";;"} {
		res := b.do(req{method: http.MethodPost, path: "/v1/saved-searches", body: body, header: map[string]string{"Content-Type": ct}})
		res.wantProblem(t, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type %q", ct)
	}
	// A body without a Content-Type is refused; an empty start body needs none.
	hr, _ := http.NewRequest(http.MethodPost, b.server.URL+"/v1/saved-searches/"+ss.ID.String()+"/start", strings.NewReader(`{"note":"x"}`))
	hr.Header.Set("Authorization", "Bearer "+b.token)
	hr.Header.Set("Idempotency-Key", "ct")
	if res := b.raw(hr); res.status != http.StatusUnsupportedMediaType {
		t.Errorf("a start body without Content-Type = %d %s, want 415", res.status, res.body)
	}
	res := b.do(req{method: http.MethodPost, path: "/v1/saved-searches", body: body,
		header: map[string]string{"Content-Type": "application/json; charset=UTF-8"}})
	if res.status != http.StatusCreated {
		t.Errorf("application/json; charset=UTF-8 = %d %s, want 201", res.status, res.body)
	}
}

func TestUnavailableWhenTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	b := setupDown(t)
	for _, r := range []req{
		{method: http.MethodGet, path: "/v1/saved-searches"},
		{method: http.MethodGet, path: "/v1/saved-searches/" + uuid.NewString()},
		{method: http.MethodPost, path: "/v1/saved-searches", body: map[string]any{"name": "n", "brief": map[string]any{"query": "q"}}},
		{method: http.MethodPost, path: "/v1/saved-searches/" + uuid.NewString() + "/start", header: map[string]string{"Idempotency-Key": "k"}},
		{method: http.MethodPost, path: "/v1/runs", body: map[string]any{"kind": "definition", "name": "n"}, header: map[string]string{"Idempotency-Key": "k"}},
		{method: http.MethodGet, path: "/v1/runs/" + uuid.NewString()},
		{method: http.MethodGet, path: "/readyz", noAuth: true},
	} {
		res := b.do(r)
		if res.status != http.StatusServiceUnavailable || res.problem(t).Code != "unavailable" || res.header.Get("Retry-After") == "" {
			t.Errorf("%s %s with the database down = %d %s (Retry-After %q), want 503 unavailable with Retry-After",
				r.method, r.path, res.status, res.body, res.header.Get("Retry-After"))
		}
	}
	if res := b.do(req{method: http.MethodGet, path: "/healthz", noAuth: true}); res.status != http.StatusOK {
		t.Errorf("/healthz with the database down = %d, want 200: the process is alive", res.status)
	}
}

// failingSavedSearches is a store whose reads fail with an error full of
// things a client must never see.
type failingSavedSearches struct {
	api.SavedSearches
	panics bool
}

const secretDetail = "password authentication failed for user searchd_admin at 10.20.30.40"

func (f failingSavedSearches) Get(context.Context, uuid.UUID, uuid.UUID) (*savedsearch.SavedSearch, error) {
	if f.panics {
		panic(secretDetail)
	}
	return nil, errors.New(secretDetail)
}

func TestInternalErrorRevealsNothing(t *testing.T) {
	t.Parallel()
	for _, panics := range []bool{false, true} {
		b := setup(t, setupOpts{deps: func(d *api.Deps) {
			d.SavedSearches = failingSavedSearches{SavedSearches: d.SavedSearches, panics: panics}
		}})
		res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches/" + uuid.NewString()})
		if res.status != http.StatusInternalServerError {
			t.Fatalf("failing store (panics %v) = %d %s, want 500", panics, res.status, res.body)
		}
		p := res.problem(t)
		if p.Code != "internal" || bytes.Contains(res.body, []byte("searchd_admin")) || bytes.Contains(res.body, []byte("10.20.30.40")) {
			t.Errorf("500 body %s reveals the failure", res.body)
		}
		reqID := res.header.Get("X-Request-Id")
		if reqID == "" || p.RequestID != reqID {
			t.Errorf("request_id = %q, X-Request-Id = %q; want the same id in both", p.RequestID, reqID)
		}
		logs := b.logs.String()
		if !strings.Contains(logs, reqID) || !strings.Contains(logs, "searchd_admin") {
			t.Errorf("the log does not hold the request id and the error:\n%s", logs)
		}
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, path := range []string{"/healthz", "/readyz"} {
		if res := b.do(req{method: http.MethodGet, path: path, noAuth: true}); res.status != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", path, res.status, res.body)
		}
	}
	// A schema behind the newest migration is not ready.
	if _, err := b.pool.Exec(context.Background(),
		`DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`); err != nil {
		t.Fatal(err)
	}
	res := b.do(req{method: http.MethodGet, path: "/readyz", noAuth: true})
	res.wantProblem(t, http.StatusServiceUnavailable, "unavailable", "/readyz on an old schema")
}

// raw sends a request built by hand and validates the answer.
func (b *bundle) raw(hr *http.Request) *response {
	b.t.Helper()
	res, err := b.server.Client().Do(hr)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	buf, _ := io.ReadAll(res.Body)
	out := &response{status: res.StatusCode, header: res.Header, body: buf}
	if err := validateAgainstOpenAPI(hr, out); err != nil {
		b.t.Errorf("%s %s answered %d %s, which the OpenAPI document does not allow: %v", hr.Method, hr.URL.Path, out.status, out.body, err)
	}
	return out
}
