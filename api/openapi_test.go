package api_test

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/api"
)

func TestOpenAPIDocumentIsValid31(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatalf("loading openapi.json: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.json does not validate: %v", err)
	}
	if _, err := openAPI(); err != nil {
		t.Fatalf("building the router: %v", err)
	}
}

func TestOpenAPIDocumentIsServed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	res := b.do(req{method: http.MethodGet, path: "/openapi.json", noAuth: true})
	if res.status != http.StatusOK || !bytes.Equal(res.body, api.OpenAPI) {
		t.Fatalf("GET /openapi.json = %d, %d bytes; want 200 and the embedded document", res.status, len(res.body))
	}
}

// TestOpenAPIDocumentsEveryRoute proves the document and the router agree:
// every route the server registers is an operation of the document, and
// every operation is a route.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	param := regexp.MustCompile(`:(\w+)`)
	served := map[string]bool{}
	for _, r := range b.api.Handler().(*echo.Echo).Routes() {
		if strings.HasPrefix(r.Method, "echo_") || strings.HasSuffix(r.Path, "*") || r.Path == "/v1" {
			continue // echo's own catch-alls for the group's middleware
		}
		served[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	for op := range served {
		if !documented[op] {
			t.Errorf("route %s is not in openapi.json", op)
		}
	}
	for op := range documented {
		if !served[op] {
			t.Errorf("openapi.json documents %s, which no route serves", op)
		}
	}
}

// TestOpenAPIValidatesRealResponses drives one request of every kind of
// answer of every operation through the running handler. do() validates
// each response against the document (status documented, headers and body
// matching their schemas); the checks here prove the validation itself is
// not vacuous.
func TestOpenAPIValidatesRealResponses(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{items: []string{"x"}})
	id := ss.ID.String()
	var started startResult
	b.start(ss.ID, "openapi", map[string]any{"max_results": 3}).decode(t, &started)
	b.start(ss.ID, "openapi", map[string]any{"max_results": 3}) // 200 replayed
	b.startDirect("openapi", map[string]any{"kind": "capability", "name": "c", "input": map[string]any{"a": []int{1}}})
	for _, r := range []req{
		{method: http.MethodPost, path: "/v1/saved-searches", body: map[string]any{"name": "n", "brief": map[string]any{"query": "q"}}},
		{method: http.MethodGet, path: "/v1/saved-searches?limit=1"},
		{method: http.MethodGet, path: "/v1/saved-searches/" + id},
		{method: http.MethodPatch, path: "/v1/saved-searches/" + id, body: map[string]any{"name": "renamed"}},
		{method: http.MethodPut, path: "/v1/saved-searches/" + id + "/baseline", body: map[string]any{"items": []string{"y"}, "cursor": "c"}},
		{method: http.MethodGet, path: "/v1/saved-searches/" + id + "/snapshots"},
		{method: http.MethodGet, path: "/v1/snapshots/" + started.Snapshot.ID.String()},
		{method: http.MethodGet, path: "/v1/runs?saved_search_id=" + id},
		{method: http.MethodGet, path: "/v1/runs/" + started.Run.ID.String()},
		{method: http.MethodGet, path: "/healthz", noAuth: true},
		{method: http.MethodGet, path: "/readyz", noAuth: true},
		{method: http.MethodDelete, path: "/v1/saved-searches/" + id},
		{method: http.MethodGet, path: "/v1/saved-searches/" + id},
		{method: http.MethodGet, path: "/v1/runs/" + uuid.NewString(), noAuth: true},
		{method: http.MethodPost, path: "/v1/runs", body: `{`, header: map[string]string{"Idempotency-Key": "x"}},
	} {
		b.do(r)
	}

	// The control: an answer that breaks the document is caught.
	hr, _ := http.NewRequest(http.MethodGet, b.server.URL+"/v1/runs/"+started.Run.ID.String(), nil)
	broken := &response{status: http.StatusOK, header: http.Header{"Content-Type": {"application/json"}},
		body: []byte(`{"id": "not-a-run"}`)}
	if err := validateAgainstOpenAPI(hr, broken); err == nil {
		t.Error("a Run body without its fields passed validation")
	}
	undocumented := &response{status: http.StatusTeapot, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(`{}`)}
	if err := validateAgainstOpenAPI(hr, undocumented); err == nil {
		t.Error("an undocumented status passed validation")
	}
}

// TestOpenAPIHasAnExampleForEveryBodyAndADescriptionForEveryOperation: a
// reader of the document (and a generated client's docs) sees an example of
// every request and answer body, valid against its schema, and what every
// operation does.
func TestOpenAPIHasAnExampleForEveryBodyAndADescriptionForEveryOperation(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("an example does not match its schema: %v", err)
	}
	bodies := 0
	check := func(where string, content openapi3.Content) {
		for ct, m := range content {
			bodies++
			if m.Example == nil && len(m.Examples) == 0 {
				t.Errorf("%s %s has no example", where, ct)
			}
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if strings.TrimSpace(op.Description) == "" {
				t.Errorf("%s %s has no description", method, path)
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				check(method+" "+path+" request", op.RequestBody.Value.Content)
			}
			for status, r := range op.Responses.Map() {
				if r.Ref == "" && r.Value != nil {
					check(method+" "+path+" "+status, r.Value.Content)
				}
			}
		}
	}
	for name, r := range doc.Components.Responses {
		check("response "+name, r.Value.Content)
	}
	if bodies < 40 {
		t.Fatalf("only %d bodies: the walk is broken", bodies)
	}
}
