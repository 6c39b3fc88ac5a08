package api_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/api"
)

// FuzzEndpoints sends arbitrary requests to every route the router
// registers, against one live server on a real database: a route picked
// by index, arbitrary path parameters and query, body, Content-Type and
// Idempotency-Key (webhook-id on the callback), and a credential picked
// among a valid token, another organization's token and every bad one
// (on the callback: a right, missing or wrong signature, over the
// webhook-id, a current webhook-timestamp and the body). Whatever the
// input, the answer
//
//   - is never a 5xx: no input may produce a 500;
//   - is one the OpenAPI document allows;
//   - writes no row when it is a 4xx: every agent.* table has the same
//     fingerprint (row count and newest row version) before and after;
//   - holds no secret and no token.
//
// An empty path parameter names organization A's real resource, so the
// fuzzer reaches the handlers behind the lookups; "a/b" fills the first
// two parameters of the callback route.
func FuzzEndpoints(f *testing.F) {
	w := newWorld(f, setupOpts{})
	routes := w.routes()
	fp := fingerprintQuery(w.agentTables(f))
	creds := append([]credential{{"valid", "Bearer " + w.token}, {"other organization", "Bearer " + w.other}},
		badCredentials(f, w.org)...)
	secrets := [][]byte{testSecret, acmeSecret, otherSecret, []byte(w.token), []byte(w.other)}

	at := func(name string) uint8 {
		i := slices.IndexFunc(routes, func(r route) bool { return r.String() == name })
		if i < 0 {
			f.Fatalf("no route %s to seed", name)
		}
		return uint8(i)
	}
	add := func(route, params, query string, body, contentType, key string, auth uint8) {
		f.Add(at(route), params, query, []byte(body), contentType, key, auth)
	}
	const js = "application/json"
	// Every route, as a client that gets everything right would call it,
	// then with every credential.
	for i, r := range routes {
		rq := w.validRequest(r)
		body, _ := rq.body.(string)
		if b, ok := rq.body.([]byte); ok {
			body = string(b)
		}
		for auth := range len(creds) {
			f.Add(uint8(i), "", "", []byte(body), js, "key", uint8(auth))
		}
	}
	// Bodies of every shape, on every route that reads one.
	bodies := []string{
		`{"name":"n","brief":{"query":"q","filters":{"a":[1,{"b":null}]}},"baseline":{"items":["x"],"cursor":"c"}}`,
		`{"name":"n"}`, `{"brief":{"query":"q"}}`, `{"items":["a","b"],"cursor":null}`,
		`{"max_results":5,"note":"n"}`, `{"max_results":0}`, `{"max_results":1e2}`, `{"max_results":"5"}`,
		`{"kind":"capability","name":"c","input":{"k":"v"}}`, `{"kind":"definition","name":"d","input":[1]}`,
		`{"kind":"definition","name":"d","input":{"n":1e400}}`, `{"input":{"s":"\ud800"}}`,
		`{"run_id":"00000000-0000-0000-0000-000000000000","provider":"acme","provider_job_id":"j"}`,
		`{"run_id":"x","provider":"ACME","provider_job_id":"\u0007"}`,
		`{"job_id":"world-job","status":"running","result":{"p":1}}`, `{"job_id":"world-job","status":"pending"}`,
		`{"name":"\u0000"}`, `{"a":` + strings.Repeat("[", 100), `{"a":` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat("}", 41),
		`{}`, ``, ` `, `null`, `[]`, `{"name":1}`, "{\"name\":\"\xff\"}", `{"items":` + strings.Repeat(`"x",`, 3) + `}`,
		`{"name":"n","name":"m","brief":{"query":"q"}}`, `{"Name":"n","brief":{"query":"q"}}`, `{} {}`,
	}
	for _, r := range []string{"POST /v1/saved-searches", "PATCH /v1/saved-searches/:id", "PUT /v1/saved-searches/:id/baseline",
		"POST /v1/saved-searches/:id/start", "POST /v1/runs", "POST /v1/provider-jobs", callbackRoute} {
		for _, b := range bodies {
			add(r, "", "", b, js, "key", 0)
		}
		add(r, "", "", `{"name":"n","brief":{"query":"q"}}`, "text/plain", "", 0)
		add(r, "", "", `{}`, "application/vnd.x+json; charset=utf-8", `"quoted"`, 0)
		add(r, "", "", `{}`, "application/json; charset=latin1", "k", 0)
		add(r, "", "", `{}`, "", "k", 0)
	}
	// Path parameters that name nothing, or name something oddly.
	for _, p := range []string{"42", "%00", "../x", "00000000-0000-0000-0000-000000000000", "{id}", " ", "\x00", "é"} {
		for _, r := range routes {
			if r.params() > 0 {
				add(r.String(), p, "", `{}`, js, "k", 0)
			}
		}
	}
	for _, p := range []string{"acme/unknown-job", "ACME/world-job", "other.vendor/world-job", "nobody/x",
		"acme/world-job", "other.vendor/" + pathOf(w.job), "ACME/" + pathOf(w.job), "acme/" + strings.ToUpper(pathOf(w.job)),
		"acme/00000000-0000-0000-0000-000000000000", "acme/{" + pathOf(w.job) + "}",
		"acme/" + strings.Repeat("j", 300), "acme/\x00", "acme/a%2Fb", "/"} {
		add(callbackRoute, p, "", `{"job_id":"world-job","status":"running"}`, js, "d-1", 0)
	}
	// Queries of the lists.
	for _, q := range []string{"limit=0", "limit=201", "limit=1", "limit=x", "cursor=bogus", "cursor=%00",
		"saved_search_id=nope", "saved_search_id=00000000-0000-0000-0000-000000000000", "limit=1&limit=2", "%zz"} {
		add("GET /v1/runs", "", q, ``, "", "", 0)
		add("GET /v1/saved-searches", "", q, ``, "", "", 0)
	}
	// Idempotency-Keys of every form.
	for _, k := range []string{`"a\"b\\c"`, `"unterminated`, `"x";p=1`, strings.Repeat("k", 255), strings.Repeat("k", 256),
		`"` + strings.Repeat("k", 256) + `"`, "clé", " k ", "a,b", `""`} {
		add("POST /v1/saved-searches/:id/start", "", "", `{}`, js, k, 0)
		add("POST /v1/runs", "", "", `{"kind":"capability","name":"c"}`, js, k, 0)
	}

	f.Fuzz(func(t *testing.T, routeIndex uint8, params, query string, body []byte, contentType, key string, auth uint8) {
		r := routes[int(routeIndex)%len(routes)]
		var values []string
		if n := r.params(); n > 1 {
			values = strings.SplitN(params, "/", n)
		} else if n == 1 {
			values = []string{params}
		}
		rq := req{method: r.method, path: w.url(r, values...), body: body, header: map[string]string{
			"Content-Type":    contentType,
			"Idempotency-Key": key,
		}}
		if query != "" {
			rq.path += "?" + escapeQuery(query)
		}
		cred := creds[int(auth)%len(creds)]
		rq.noAuth = cred.header == ""
		rq.header["Authorization"] = cred.header
		if r.String() == callbackRoute {
			rq.header["Idempotency-Key"] = ""
			rq.header[api.HeaderDeliveryID] = key
			provider, _, _ := strings.Cut(params, "/")
			secret := map[string][]byte{otherProvider: otherSecret}[provider]
			if secret == nil {
				secret = acmeSecret
			}
			// Signed as the server will read the id: HTTP drops the white
			// space around a header value.
			now := time.Now()
			rq.header[api.HeaderTimestamp] = unix(now)
			switch auth % 3 {
			case 0:
				rq.header[api.HeaderSignature] = sign(secret, strings.TrimSpace(key), now, body)
			case 1:
				rq.header[api.HeaderSignature] = ""
			case 2:
				rq.header[api.HeaderSignature] = sign(testSecret, strings.TrimSpace(key), now, body)
			}
		}

		before, err := w.fingerprint(fp)
		if err != nil {
			t.Fatal(err)
		}
		res, err := w.send(rq)
		if res == nil && err != nil {
			t.Skipf("the client would not send it: %v", err) // an invalid header value or URL
		}
		if err != nil {
			t.Fatal(err)
		}
		if res.status >= 500 {
			t.Fatalf("%s %s (%s) with body %q = %d %s", rq.method, rq.path, cred.name, body, res.status, res.body)
		}
		if res.status >= 400 {
			after, err := w.fingerprint(fp)
			if err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Fatalf("%s %s (%s) with body %q = %d %s, and wrote rows: fingerprint %s, was %s",
					rq.method, rq.path, cred.name, body, res.status, res.body, after, before)
			}
		}
		var head bytes.Buffer
		_ = res.header.Write(&head)
		for _, s := range secrets {
			if bytes.Contains(res.body, s) || bytes.Contains(head.Bytes(), s) {
				t.Fatalf("%s %s answered a secret or token %.12q…: %s %s", rq.method, rq.path, s, head.Bytes(), res.body)
			}
		}
	})
}

// escapeQuery percent-encodes the bytes of q that may not appear in a
// request line's query (RFC 3986 §3.4), and leaves the rest, '%' included,
// as the fuzzer wrote it. Unescaped, a space would split the request line,
// and net/http itself, not the API, would answer the malformed request.
func escapeQuery(q string) string {
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"#<>\^`+"`"+`{|}`, c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
