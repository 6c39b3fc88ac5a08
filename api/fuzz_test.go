package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// fuzzRoutes are the routes that read a body, by the index a fuzz input
// picks.
var fuzzRoutes = []struct{ method, path string }{
	{http.MethodPost, "/v1/saved-searches"},
	{http.MethodPatch, "/v1/saved-searches/{id}"},
	{http.MethodPut, "/v1/saved-searches/{id}/baseline"},
	{http.MethodPost, "/v1/saved-searches/{id}/start"},
	{http.MethodPost, "/v1/runs"},
}

// FuzzBodiesNeverAnswerInternal sends arbitrary bytes, with an arbitrary
// Content-Type and Idempotency-Key, to every route that reads a body, and
// requires an answer the OpenAPI document allows that is never a 5xx: no
// input of any shape may produce a 500.
func FuzzBodiesNeverAnswerInternal(f *testing.F) {
	seeds := []string{
		`{"name":"n","brief":{"query":"q","filters":{"a":[1,{"b":null}]}},"baseline":{"items":["x"],"cursor":"c"}}`,
		`{"name":"n"}`, `{"brief":{"query":"q"}}`, `{"items":["a","b"],"cursor":null}`,
		`{"max_results":5,"note":"n"}`, `{"kind":"capability","name":"c","input":{"k":"v"}}`,
		`{"kind":"definition","name":"d","input":{"n":1e400}}`, `{"input":{"s":"\ud800"}}`,
		`{"name":"\u0000"}`, `{"a":` + strings.Repeat("[", 100), `{}`, ``, `null`, `[]`, `{"name":1}`,
		"{\"name\":\"\xff\"}", `{"items":` + strings.Repeat(`"x",`, 3) + `}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s), "application/json", "key")
	}
	f.Add(uint8(0), []byte(`{"name":"n","brief":{"query":"q"}}`), "text/plain", "")
	f.Add(uint8(3), []byte(`{}`), "application/vnd.x+json; charset=utf-8", `"quoted"`)

	b := setup(f, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	f.Fuzz(func(t *testing.T, route uint8, body []byte, contentType, key string) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		path := strings.ReplaceAll(rt.path, "{id}", ss.ID.String())
		res, err := b.send(req{method: rt.method, path: path, body: body,
			header: map[string]string{"Content-Type": contentType, "Idempotency-Key": key}})
		if res == nil && err != nil {
			t.Skipf("the client would not send it: %v", err) // an invalid header value
		}
		if err != nil {
			t.Fatal(err)
		}
		if res.status >= 500 {
			t.Fatalf("%s %s with body %q = %d %s", rt.method, path, body, res.status, res.body)
		}
	})
}
