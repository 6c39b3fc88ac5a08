package api_test

import (
	"encoding/json"
	"html"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/searchd/searchd/api"
)

// docOperation is one operation of the OpenAPI document with what the
// tests below need of it.
type docOperation struct {
	method, path string
	op           *openapi3.Operation
}

func (o docOperation) String() string { return o.method + " " + o.path }

// documentOperations loads the embedded document and lists its operations.
func documentOperations(t *testing.T) []docOperation {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	var ops []docOperation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, docOperation{method, path, op})
		}
	}
	if len(ops) < 40 {
		t.Fatalf("only %d operations: the walk is broken", len(ops))
	}
	return ops
}

// mediaExamples returns the examples of one media type: its example and
// each of its named examples.
func mediaExamples(m *openapi3.MediaType) []any {
	var out []any
	if m.Example != nil {
		out = append(out, m.Example)
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range m.Examples {
			if !yield(k) {
				return
			}
		}
	}) {
		if e := m.Examples[name]; e != nil && e.Value != nil {
			out = append(out, e.Value.Value)
		}
	}
	return out
}

// eachBody calls f for the request body of op (if it takes one) and for
// every response that has content, naming it.
func eachBody(o docOperation, f func(where string, m *openapi3.MediaType, asRequest bool)) {
	if rb := o.op.RequestBody; rb != nil && rb.Value != nil {
		for ct, m := range rb.Value.Content {
			f(o.String()+" request "+ct, m, true)
		}
	}
	for status, r := range o.op.Responses.Map() {
		if r.Value == nil {
			continue
		}
		for ct, m := range r.Value.Content {
			f(o.String()+" "+status+" "+ct, m, false)
		}
	}
}

// TestOpenAPIEveryOperationHasValidExamples walks every operation: its
// request body (when it takes one) and its success response (when it has
// a body) carry an example, and every example of every body validates
// against its schema. A failure names the operation.
func TestOpenAPIEveryOperationHasValidExamples(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, o := range documentOperations(t) {
		hasSuccessBody, hasSuccessExample := false, false
		for status, r := range o.op.Responses.Map() {
			if !strings.HasPrefix(status, "2") || r.Value == nil {
				continue
			}
			for _, m := range r.Value.Content {
				hasSuccessBody = true
				hasSuccessExample = hasSuccessExample || len(mediaExamples(m)) > 0
			}
		}
		if hasSuccessBody && !hasSuccessExample {
			t.Errorf("%s: its success response has no example", o)
		}
		if o.method != http.MethodHead && o.method != http.MethodDelete && !hasSuccessBody &&
			o.op.Responses.Value("204") == nil {
			t.Errorf("%s: no success response with a body, nor a 204", o)
		}
		eachBody(o, func(where string, m *openapi3.MediaType, asRequest bool) {
			examples := mediaExamples(m)
			if len(examples) == 0 {
				t.Errorf("%s: no example", where)
				return
			}
			if m.Schema == nil || m.Schema.Value == nil {
				t.Errorf("%s: no schema", where)
				return
			}
			opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors(), openapi3.EnableJSONSchema2020(),
				openapi3.EnableFormatValidation(), openapi3.VisitAsResponse()}
			if asRequest {
				opts[len(opts)-1] = openapi3.VisitAsRequest()
			}
			for i, ex := range examples {
				checked++
				if err := m.Schema.Value.VisitJSON(ex, opts...); err != nil {
					t.Errorf("%s: example %d does not match its schema: %v", where, i, err)
				}
			}
		})
	}
	if checked < 40 {
		t.Fatalf("only %d examples checked: the walk is broken", checked)
	}
}

var (
	docsSection = regexp.MustCompile(`(?s)<section id="([^"]+)">(.*?)</section>`)
	docsPre     = regexp.MustCompile(`(?s)<pre>(.*?)</pre>`)
)

// TestDocsPageShowsEveryOperationAndItsExamples: GET /docs is an HTML page
// without a token, whose policy admits no script, with a section per
// operation that names its method and path and shows every example of
// its bodies.
func TestDocsPageShowsEveryOperationAndItsExamples(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	res := b.do(req{method: http.MethodGet, path: "/docs", noAuth: true})
	if res.status != http.StatusOK || !strings.HasPrefix(res.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /docs = %d %q, want 200 text/html", res.status, res.header.Get("Content-Type"))
	}
	csp := res.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy = %q, want default-src 'none' and no script or inline source", csp)
	}
	page := string(res.body)
	if strings.Contains(page, "<script") || strings.Contains(page, "://") && strings.Contains(page, "src=") {
		t.Error("the page holds a script or loads something from elsewhere")
	}
	sections := map[string]string{}
	for _, m := range docsSection.FindAllStringSubmatch(page, -1) {
		sections[m[1]] = m[2]
	}
	for _, o := range documentOperations(t) {
		section, ok := sections[o.op.OperationID]
		if !ok {
			t.Errorf("%s (%s) has no section", o, o.op.OperationID)
			continue
		}
		head := `<span class="m">` + strings.ToLower(o.method) + `</span> <code>` + html.EscapeString(o.path) + `</code>`
		if !strings.Contains(section, head) {
			t.Errorf("%s: the section does not name its method and path", o)
		}
		if !strings.Contains(page, `href="#`+o.op.OperationID+`"`) {
			t.Errorf("%s: the table of contents does not link it", o)
		}
		var shown []any
		for _, p := range docsPre.FindAllStringSubmatch(section, -1) {
			text := html.UnescapeString(p[1])
			var v any
			if json.Unmarshal([]byte(text), &v) != nil {
				v = text // a string example, shown as it is
			}
			shown = append(shown, v)
		}
		eachBody(o, func(where string, m *openapi3.MediaType, _ bool) {
			for i, ex := range mediaExamples(m) {
				var want any
				if raw, err := json.Marshal(ex); err != nil || json.Unmarshal(raw, &want) != nil {
					t.Fatalf("%s: example %d does not round-trip", where, i)
				}
				if !slices.ContainsFunc(shown, func(v any) bool { return reflect.DeepEqual(v, want) }) {
					t.Errorf("%s: example %d is not on the page", where, i)
				}
			}
		})
	}
	head := b.do(req{method: http.MethodHead, path: "/docs", noAuth: true})
	if head.status != http.StatusOK || len(head.body) != 0 {
		t.Errorf("HEAD /docs = %d with %d bytes, want 200 and no body", head.status, len(head.body))
	}
	if post := b.do(req{method: http.MethodPost, path: "/docs", noAuth: true}); post.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /docs = %d, want 405", post.status)
	}
}
