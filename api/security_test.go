package api_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dbclock/dbclocktest"
)

// TestEveryBearerRouteRefusesBadTokens sends every credential a client can
// get wrong to every route the router registers, but for the public ones
// and the signed callback: each must answer 401 unauthorized with a
// WWW-Authenticate challenge and write nothing. A route added without the
// authenticate middleware fails here without anyone listing it.
func TestEveryBearerRouteRefusesBadTokens(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	creds := badCredentials(t, w.org)
	fp := fingerprintQuery(w.agentTables(t))
	for _, r := range w.bearerRoutes(t) {
		t.Run(r.String(), func(t *testing.T) {
			before, err := w.fingerprint(fp)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range creds {
				rq := w.validRequest(r)
				rq.noAuth = c.header == ""
				rq.header["Authorization"] = c.header
				wantUnauthorized(t, c.name, w.do(rq))
			}
			// A valid token in the query is no token.
			rq := w.validRequest(r)
			rq.noAuth = true
			rq.path += "?access_token=" + w.token
			wantUnauthorized(t, "token in the query", w.do(rq))
			// Two Authorization headers, one of them valid.
			hr, err := http.NewRequest(r.method, w.server.URL+w.url(r), nil)
			if err != nil {
				t.Fatal(err)
			}
			hr.Header.Add("Authorization", "Bearer "+w.token)
			hr.Header.Add("Authorization", "Bearer "+w.token)
			wantUnauthorized(t, "two Authorization headers", w.raw(hr))

			if after, err := w.fingerprint(fp); err != nil || after != before {
				t.Errorf("refused requests wrote rows: fingerprint %s, want %s (%v)", after, before, err)
			}
			// The control: the same request with the right token gets past
			// authentication.
			if res := w.do(w.validRequest(r)); res.status == http.StatusUnauthorized || res.status >= 500 {
				t.Errorf("with a valid token = %d %s, want neither 401 nor 5xx", res.status, res.body)
			}
		})
	}
}

// TestTokenStopsWorkingWhenItExpires uses one token on every bearer route
// while it is valid, then again once the server's clock has passed its
// exp: each use after it must answer 401, however recently the same token
// was accepted (a server that remembers verified tokens must still check
// their expiry).
func TestTokenStopsWorkingWhenItExpires(t *testing.T) {
	t.Parallel()
	clk := dbclocktest.New(time.Now())
	w := newWorld(t, setupOpts{deps: func(d *api.Deps) { d.Now = clk.Now }})
	tok, err := auth.SignToken(testSecret, w.org, "short-lived", clk.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	routes := w.bearerRoutes(t)
	for _, r := range routes {
		rq := w.validRequest(r)
		rq.header["Authorization"] = "Bearer " + tok
		if res := w.do(rq); res.status == http.StatusUnauthorized {
			t.Fatalf("%s with a token valid for another minute = %d %s", r, res.status, res.body)
		}
	}
	clk.Advance(time.Minute + time.Second)
	for _, r := range routes {
		rq := w.validRequest(r)
		rq.header["Authorization"] = "Bearer " + tok
		wantUnauthorized(t, r.String()+" after the token expired", w.do(rq))
	}
}

func wantUnauthorized(t *testing.T, name string, res *response) {
	t.Helper()
	if res.status != http.StatusUnauthorized || res.problem(t).Code != api.CodeUnauthorized {
		t.Errorf("%s: %d %s, want 401 unauthorized", name, res.status, res.body)
		return
	}
	if !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("%s: WWW-Authenticate = %q, want a Bearer challenge", name, res.header.Get("WWW-Authenticate"))
	}
}

// TestPublicRoutesNeedNoToken proves the exclusions of the bearer tests
// are what they claim: each public route the router has answers without a
// credential.
func TestPublicRoutesNeedNoToken(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, r := range b.routes() {
		if !publicRoutes[r.String()] {
			continue
		}
		path := strings.Replace(r.path, ":code", api.CodeInProgress, 1) // a problem type's page
		if res := b.do(req{method: r.method, path: path, noAuth: true}); res.status != http.StatusOK {
			t.Errorf("%s without a token = %d %s, want 200", r, res.status, res.body)
		}
	}
}

// tenantCases say, for each bearer route without a path parameter, what
// organization B must see of organization A's resources through it. A
// route with a path parameter is checked by one rule: B naming A's
// resource gets 404 not_found and changes nothing.
var tenantCases = map[string]func(t *testing.T, w *world, r route){
	"GET /v1/saved-searches": func(t *testing.T, w *world, r route) {
		w.wantNoneOfA(t, w.asOther(req{method: r.method, path: r.path}))
	},
	"GET /v1/runs": func(t *testing.T, w *world, r route) {
		w.wantNoneOfA(t, w.asOther(req{method: r.method, path: r.path}))
		w.wantNoneOfA(t, w.asOther(req{method: r.method, path: r.path + "?saved_search_id=" + w.ss.ID.String()}))
	},
	"POST /v1/saved-searches": func(t *testing.T, w *world, r route) {
		res := w.asOther(w.validRequest(r))
		var created struct{ ID uuid.UUID }
		res.decode(t, &created)
		if res.status != http.StatusCreated {
			t.Fatalf("B's create = %d %s, want 201", res.status, res.body)
		}
		// B's saved search is B's: A cannot read it.
		if got := w.do(req{method: http.MethodGet, path: "/v1/saved-searches/" + created.ID.String()}); got.status != http.StatusNotFound {
			t.Errorf("A reading B's new saved search = %d %s, want 404", got.status, got.body)
		}
	},
	"POST /v1/runs": func(t *testing.T, w *world, r route) {
		// A's key and A's very body: B gets a Run of its own, not A's.
		res := w.asOther(req{method: r.method, path: r.path, body: `{"kind":"definition","name":"world"}`,
			header: map[string]string{"Idempotency-Key": "world-direct"}})
		var got startResult
		res.decode(t, &got)
		if res.status != http.StatusCreated || got.Run.ID == w.directRun || got.Run.OrganizationID != w.otherOrg {
			t.Errorf("B's direct start with A's key = %d %s, want 201 with a Run of B's", res.status, res.body)
		}
	},
	"POST /v1/provider-jobs": func(t *testing.T, w *world, r route) {
		w.wantNotFound(t, w.validRequest(r)) // the body names A's Run
	},
	"GET /v1/service-keys": func(t *testing.T, w *world, r route) {
		res := w.asOther(req{method: r.method, path: r.path})
		w.wantNoneOfA(t, res)
		if bytes.Contains(res.body, []byte(w.keyID.String())) {
			t.Errorf("B's key list names A's key %s: %s", w.keyID, res.body)
		}
	},
	"POST /v1/service-keys": func(t *testing.T, w *world, r route) {
		// B's new key is B's: it opens none of A's records.
		res := w.asOther(w.validRequest(r))
		var created struct{ Token string }
		res.decode(t, &created)
		if res.status != http.StatusCreated || created.Token == "" {
			t.Fatalf("B's key = %d %s, want 201", res.status, res.body)
		}
		for _, path := range []string{"/v1/saved-searches/" + w.ss.ID.String(), "/v1/runs/" + w.runID.String()} {
			if got := w.do(req{method: http.MethodGet, path: path, token: created.Token}); got.status != http.StatusNotFound {
				t.Errorf("B's key reading A's %s = %d %s, want 404", path, got.status, got.body)
			}
		}
		w.wantNoneOfA(t, w.do(req{method: http.MethodGet, path: "/v1/runs", token: created.Token}))
	},
	"GET /v1/webhook-endpoints": func(t *testing.T, w *world, r route) {
		w.wantNoneOfA(t, w.asOther(req{method: r.method, path: r.path}))
	},
	"POST /v1/webhook-endpoints": func(t *testing.T, w *world, r route) {
		res := w.asOther(w.validRequest(r))
		var created struct{ ID uuid.UUID }
		res.decode(t, &created)
		if res.status != http.StatusCreated {
			t.Fatalf("B's create = %d %s, want 201", res.status, res.body)
		}
		if got := w.do(req{method: http.MethodGet, path: "/v1/webhook-endpoints/" + created.ID.String(), token: w.admin}); got.status != http.StatusNotFound {
			t.Errorf("A reading B's new endpoint = %d %s, want 404", got.status, got.body)
		}
	},
}

// TestEveryBearerRouteIsolatesTenants sends organization B's valid token to
// every bearer route, aimed at organization A's resources. A route added
// without a case here fails.
func TestEveryBearerRouteIsolatesTenants(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	for _, r := range w.bearerRoutes(t) {
		t.Run(r.String(), func(t *testing.T) {
			if r.params() > 0 {
				if w.resourceID(r.path) == "" {
					t.Fatalf("world has no resource of organization A for %s: add one to resourceID", r)
				}
				w.wantNotFound(t, w.validRequest(r))
				if r.method == http.MethodGet {
					// The control: the id names a resource A can read.
					if res := w.do(w.validRequest(r)); res.status != http.StatusOK {
						t.Errorf("A's own %s = %d %s, want 200", r, res.status, res.body)
					}
				}
				return
			}
			check, ok := tenantCases[r.String()]
			if !ok {
				t.Fatalf("no tenant-isolation case for %s: add one to tenantCases", r)
			}
			check(t, w, r)
		})
	}
	// Nothing B tried changed A's saved search.
	var after struct {
		Name    string
		Version int64
	}
	w.do(req{method: http.MethodGet, path: "/v1/saved-searches/" + w.ss.ID.String()}).decode(t, &after)
	if after.Name != w.ss.Name || after.Version != w.ss.Version {
		t.Errorf("A's saved search after B's attempts = %+v, want it unchanged (%s, version %d)", after, w.ss.Name, w.ss.Version)
	}
}

// asOther sends rq with organization B's token.
func (w *world) asOther(rq req) *response {
	w.t.Helper()
	if rq.header == nil {
		rq.header = map[string]string{}
	}
	rq.header["Authorization"] = "Bearer " + w.other
	if rq.method == http.MethodPut && strings.HasSuffix(rq.path, "/status") {
		rq.header["Authorization"] = "Bearer " + w.otherRuntime // runtimeRoute takes B's runtime credential
	}
	if strings.HasPrefix(rq.path, "/v1/service-keys") || strings.HasPrefix(rq.path, "/v1/webhook-endpoints") {
		rq.header["Authorization"] = "Bearer " + w.otherAdmin // the admin routes take B's admin
	}
	return w.do(rq)
}

// wantNotFound sends rq as organization B and requires 404 not_found and
// no row written.
func (w *world) wantNotFound(t *testing.T, rq req) {
	t.Helper()
	fp := fingerprintQuery(w.agentTables(t))
	before, err := w.fingerprint(fp)
	if err != nil {
		t.Fatal(err)
	}
	res := w.asOther(rq)
	if res.status != http.StatusNotFound || res.problem(t).Code != api.CodeNotFound {
		t.Errorf("B's %s %s = %d %s, want 404 not_found", rq.method, rq.path, res.status, res.body)
	}
	if after, err := w.fingerprint(fp); err != nil || after != before {
		t.Errorf("B's %s %s wrote rows: fingerprint %s, want %s (%v)", rq.method, rq.path, after, before, err)
	}
}

// wantNoneOfA requires a 200 list that names no resource of organization A.
func (w *world) wantNoneOfA(t *testing.T, res *response) {
	t.Helper()
	if res.status != http.StatusOK {
		t.Fatalf("B's list = %d %s, want 200", res.status, res.body)
	}
	for _, id := range []uuid.UUID{w.ss.ID, w.runID, w.directRun, w.snapshot, w.job.ID, w.job.RunID, w.org, w.endpoint} {
		if bytes.Contains(res.body, []byte(id.String())) {
			t.Errorf("B's list names %s of organization A: %s", id, res.body)
		}
	}
}

// TestNoSecretInAnyAnswerOrLog drives every route with good and bad
// credentials, good and bad bodies, and the callback with good and bad
// signatures, with the server logging at debug level, and requires that no
// answer (status line, header or body) and no log line holds the JWT
// secret, a provider secret, or any bearer token a client sent, whole or
// its signature alone.
func TestNoSecretInAnyAnswerOrLog(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	creds := badCredentials(t, w.org)
	var answers []*response
	send := func(rq req) {
		answers = append(answers, w.do(rq))
	}
	for _, r := range w.routes() {
		send(w.validRequest(r))
		send(w.validRequest(r)) // a replay, where the route has one
		bad := w.validRequest(r)
		bad.body = `{"name": 1, "kind": "x", "items": "y", "run_id": "` + w.token + `"}`
		send(bad)
		bad.body = "{" + w.token
		send(bad)
		for _, c := range creds {
			rq := w.validRequest(r)
			rq.noAuth = c.header == ""
			rq.header["Authorization"] = c.header
			send(rq)
		}
		send(w.asOtherReq(w.validRequest(r)))
	}
	// The callback, signed wrong in every way, or carrying a bearer token.
	body := callbackBody(w.job.ProviderJobID, "running", nil)
	for _, sig := range []string{"", "-", sign(otherSecret, "d", time.Now(), body), "v1," + base64.StdEncoding.EncodeToString(acmeSecret),
		"sha256=" + hex.EncodeToString(acmeSecret), string(acmeSecret)} {
		rq := w.callbackReq(delivery{jobID: pathOf(w.job), deliveryID: "d-" + uuid.NewString(), body: body, signature: sig,
			header: bearer(w.token)})
		send(rq)
	}

	var secrets []string
	for _, s := range [][]byte{testSecret, acmeSecret, otherSecret} {
		secrets = append(secrets, string(s), hex.EncodeToString(s),
			base64.StdEncoding.EncodeToString(s), base64.RawURLEncoding.EncodeToString(s))
	}
	for _, tok := range []string{w.token, w.other, w.runtime, w.otherRuntime} {
		secrets = append(secrets, tok, tok[strings.LastIndexByte(tok, '.')+1:])
	}
	for _, c := range creds {
		if tok, ok := strings.CutPrefix(c.header, "Bearer "); ok && len(tok) > 16 {
			secrets = append(secrets, tok)
			if sig := tok[strings.LastIndexByte(tok, '.')+1:]; len(sig) > 16 {
				secrets = append(secrets, sig)
			}
		}
	}
	for _, res := range answers {
		var head bytes.Buffer
		_ = res.header.Write(&head)
		for _, s := range secrets {
			if bytes.Contains(res.body, []byte(s)) || bytes.Contains(head.Bytes(), []byte(s)) {
				t.Errorf("an answer (%d) holds the secret or token %.12q…:\n%s\n%s", res.status, s, head.String(), res.body)
			}
		}
	}
	logs := w.logs.String()
	if strings.Count(logs, `"msg":"request"`) < len(answers) {
		t.Fatalf("the log holds %d request lines for %d requests: the capture is broken", strings.Count(logs, `"msg":"request"`), len(answers))
	}
	for line := range strings.Lines(logs) {
		for _, s := range secrets {
			if strings.Contains(line, s) {
				t.Errorf("a log line holds the secret or token %.12q…: %s", s, line)
			}
		}
	}
}

// asOtherReq is rq with organization B's token.
func (w *world) asOtherReq(rq req) req {
	rq.header["Authorization"] = "Bearer " + w.other
	return rq
}

// testBodyLimit is the body limit of the body-limit tests.
const testBodyLimit = 1024

// readSlack is what a reader may take beyond the limit to see that a body
// exceeds it: http.MaxBytesReader asks for one byte more; one read buffer
// is the most any reader needs.
const readSlack = 4096

// endless is a body that never ends: prefix, then 'x' forever. It counts
// the bytes it has given, and gives up (io.EOF) after hardCap, so a server
// that reads bodies whole fails the test instead of hanging it.
type endless struct {
	prefix []byte
	n      atomic.Int64
}

const hardCap = 64 << 20

func (e *endless) Read(p []byte) (int, error) {
	n := e.n.Load()
	if n >= hardCap {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), hardCap-n)]
	for i := range p {
		if j := n + int64(i); j < int64(len(e.prefix)) {
			p[i] = e.prefix[j]
		} else {
			p[i] = 'x'
		}
	}
	e.n.Add(int64(len(p)))
	return len(p), nil
}

// stalled is a body whose Read blocks until release is closed: a client
// that announced a large body and sends it slowly, or never.
type stalled struct {
	release chan struct{}
	reads   atomic.Int64
}

func (s *stalled) Read([]byte) (int, error) {
	s.reads.Add(1)
	<-s.release
	return 0, io.EOF
}

// serve runs hr through the handler in this process, with the body the
// handler sees being body, and returns the answer. It fails the test if
// the handler has not answered within a few seconds, which is what a
// handler waiting for a stalled body would do.
func serve(t *testing.T, h http.Handler, hr *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, hr)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s %s: no answer after 10 s: the handler is waiting for the body", hr.Method, hr.URL.Path)
	}
	return rec
}

// TestBodyOverTheLimitIsRefusedBeforeItIsRead proves that a body over the
// limit answers 413 payload_too_large having read at most the limit and a
// read buffer of it: a body of unknown length that never ends is cut at
// the limit, and a declared length over the limit is refused before a
// byte is read (the body here would block forever). Both on a JSON route,
// the optional body of a start, and the signed callback, whose body must
// be read before the signature can be checked.
func TestBodyOverTheLimitIsRefusedBeforeItIsRead(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{deps: func(d *api.Deps) { d.MaxBodyBytes = testBodyLimit }})
	h := w.api.Handler()
	for _, rs := range []string{"POST /v1/saved-searches", "POST /v1/saved-searches/:id/start", "POST /v1/runs",
		"PATCH /v1/saved-searches/:id", "PUT /v1/saved-searches/:id/baseline", "POST /v1/provider-jobs", callbackRoute} {
		method, path, _ := strings.Cut(rs, " ")
		r := route{method, path}
		t.Run(rs, func(t *testing.T) {
			request := func(body io.Reader, length int64) *http.Request {
				rq := w.validRequest(r)
				hr := httptest.NewRequest(r.method, rq.path, body)
				hr.ContentLength = length
				hr.Header.Set("Content-Type", "application/json")
				if !rq.noAuth {
					hr.Header.Set("Authorization", "Bearer "+w.token)
				}
				for k, v := range rq.header {
					hr.Header.Set(k, v)
				}
				return hr
			}
			// Unknown length, never ending.
			body := &endless{prefix: []byte(`{"name": "`)}
			rec := serve(t, h, request(body, -1))
			if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), api.CodePayloadTooLarge) {
				t.Errorf("an endless body = %d %s, want 413 payload_too_large", rec.Code, rec.Body)
			}
			if n := body.n.Load(); n > testBodyLimit+readSlack {
				t.Errorf("the server read %d bytes of an endless body, want at most %d (limit %d)", n, testBodyLimit+readSlack, testBodyLimit)
			} else {
				t.Logf("read %d bytes of an endless body (limit %d)", n, testBodyLimit)
			}
			// A declared length over the limit, whose bytes never come.
			st := &stalled{release: make(chan struct{})}
			t.Cleanup(func() { close(st.release) })
			rec = serve(t, h, request(st, 1<<40))
			if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), api.CodePayloadTooLarge) {
				t.Errorf("a declared 1 TiB body = %d %s, want 413 payload_too_large", rec.Code, rec.Body)
			}
			if n := st.reads.Load(); n != 0 {
				t.Errorf("the server read the body of a declared 1 TiB request %d times, want none", n)
			}
		})
	}
	w.wantCount(t, 0, `SELECT count(*) FROM agent.webhook_drops`)
}

// TestNoRouteReadsAnEndlessBody sends a body that never ends to every
// route, with valid credentials: whatever a route answers, it never reads
// past the limit, and never answers 5xx.
func TestNoRouteReadsAnEndlessBody(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{deps: func(d *api.Deps) { d.MaxBodyBytes = testBodyLimit }})
	h := w.api.Handler()
	for _, r := range w.routes() {
		rq := w.validRequest(r)
		body := &endless{prefix: []byte(`{"items": ["`)}
		hr := httptest.NewRequest(r.method, rq.path, body)
		hr.ContentLength = -1
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Authorization", "Bearer "+w.token)
		for k, v := range rq.header {
			hr.Header.Set(k, v)
		}
		rec := serve(t, h, hr)
		if n := body.n.Load(); n > testBodyLimit+readSlack || rec.Code >= 500 {
			t.Errorf("%s with an endless body = %d %s having read %d bytes; want no 5xx and at most %d bytes read",
				r, rec.Code, rec.Body, n, testBodyLimit+readSlack)
		}
	}
}

// TestBodyOverTheLimitOverTheWire checks the same through a real
// connection, written by hand so nothing buffers the body: a client that
// announces a body over the limit, sends a few bytes of it and then
// stalls gets its 413 at once, while the handler has read none of it.
func TestBodyOverTheLimitOverTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{deps: func(d *api.Deps) { d.MaxBodyBytes = testBodyLimit }})
	var read atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		// A shallow copy: net/http decides what to do with an unread body
		// by the type of its own request's Body, which must stay its own.
		r = r.WithContext(r.Context())
		r.Body = &countingBody{ReadCloser: r.Body, n: &read}
		w.api.Handler().ServeHTTP(rw, r)
	}))
	t.Cleanup(ts.Close)
	for _, r := range []route{{http.MethodPost, "/v1/saved-searches"}, {http.MethodPost, "/v1/callbacks/:provider/jobs/:job_id"}} {
		read.Store(0)
		rq := w.validRequest(r)
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var head strings.Builder
		fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: searchd\r\nContent-Type: application/json\r\n", r.method, rq.path)
		fmt.Fprintf(&head, "Content-Length: %d\r\nAuthorization: Bearer %s\r\n", int64(1)<<40, w.token)
		for k, v := range rq.header {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
		head.WriteString("\r\n{\"name\": \"")
		if _, err := io.WriteString(conn, head.String()); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s with a stalled 1 TiB body: no answer: %v", r, err)
		}
		buf, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(buf, []byte(api.CodePayloadTooLarge)) {
			t.Errorf("%s with a stalled 1 TiB body = %d %s, want 413 payload_too_large", r, res.StatusCode, buf)
		}
		if n := read.Load(); n != 0 {
			t.Errorf("%s: the handler read %d bytes of a body over the limit, want none", r, n)
		}
	}
}

// countingBody counts the bytes a handler reads of a request body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestCallbackSignatureBindsTheExactBody adds to TestCallbackSignatureIsChecked
// the forgeries that reuse a genuine signature: on a body changed by one
// byte, on another provider's path, under another delivery id or
// timestamp, twice in one request, and a bearer token beside a bad
// signature. Each answers 401 and records nothing.
func TestCallbackSignatureBindsTheExactBody(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	body := callbackBody(f.job.ProviderJobID, "succeeded", map[string]any{"n": 1})
	now := time.Now()
	good := sign(acmeSecret, "d-good", now, body)
	fp := fingerprintQuery(f.agentTables(t))
	before, err := f.fingerprint(fp)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		d    delivery
	}{
		{"a trailing newline", delivery{body: append(slices.Clone(body), '\n')}},
		{"white space inside", delivery{body: bytes.Replace(body, []byte(`,`), []byte(`, `), 1)}},
		{"the body cut short", delivery{body: body[:len(body)-1]}},
		{"an empty body", delivery{body: []byte{}}},
		{"acme's signature on the other provider's path", delivery{provider: otherProvider}},
		{"another delivery id", delivery{deliveryID: "d-other"}},
		{"the delivery id in capitals", delivery{deliveryID: "D-GOOD"}},
		{"another timestamp", delivery{at: now.Add(time.Second)}},
		{"a valid bearer token and no signature", delivery{signature: "-", header: bearer(f.token)}},
		{"the version in capitals", delivery{signature: "V1," + strings.TrimPrefix(good, "v1,")}},
		{"the MAC as hex", delivery{signature: "v1," + hex.EncodeToString(must(base64.StdEncoding.DecodeString(strings.TrimPrefix(good, "v1,"))))}},
	} {
		d := tt.d
		d.jobID = pathOf(f.job)
		d.deliveryID = cmp.Or(d.deliveryID, "d-good")
		if d.body == nil {
			d.body = body
		}
		if d.at.IsZero() {
			d.at = now
		}
		d.signature = cmp.Or(d.signature, good)
		res := f.callback(d)
		if res.status != http.StatusUnauthorized || res.problem(t).Code != api.CodeUnauthorized {
			t.Errorf("%s: callback = %d %s, want 401 unauthorized", tt.name, res.status, res.body)
		}
	}
	// Two webhook-signature headers, the genuine one first, and two
	// webhook-timestamp headers, the signed one first.
	for _, h := range []struct {
		name string
		add  func(h http.Header)
	}{
		{"two signature headers", func(h http.Header) {
			h.Set(api.HeaderTimestamp, unix(now))
			h.Add(api.HeaderSignature, good)
			h.Add(api.HeaderSignature, good)
		}},
		{"two timestamp headers", func(h http.Header) {
			h.Add(api.HeaderTimestamp, unix(now))
			h.Add(api.HeaderTimestamp, unix(now.Add(time.Second)))
			h.Set(api.HeaderSignature, good)
		}},
	} {
		hr, err := http.NewRequest(http.MethodPost, f.server.URL+"/v1/callbacks/acme/jobs/"+pathOf(f.job), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set(api.HeaderDeliveryID, "d-good")
		h.add(hr.Header)
		if res := f.raw(hr); res.status != http.StatusUnauthorized {
			t.Errorf("%s = %d %s, want 401", h.name, res.status, res.body)
		}
	}
	if after, err := f.fingerprint(fp); err != nil || after != before {
		t.Errorf("forged callbacks wrote rows: fingerprint %s, want %s (%v)", after, before, err)
	}
	// The control: the genuine delivery is accepted.
	d := delivery{jobID: pathOf(f.job), deliveryID: "d-good", body: body, at: now, signature: good}
	if status, _ := f.callback(d).answer(t); status != "accepted" {
		t.Errorf("the genuine delivery was not accepted")
	}
}

// must returns v, panicking on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestCallbackReplayUnderAFreshDeliveryIDIsRefused was a finding of the
// review of issue 7: the signature covered the body alone, and the body
// carries no time or nonce, so a signed body captured once could be
// replayed any time under a new delivery id, each replay a new claim,
// applied: a running job's result went back to the replayed one. Now the
// delivery id and a timestamp are signed with the body, and the timestamp
// must be within 5 minutes of the server's clock.
func TestCallbackReplayUnderAFreshDeliveryIDIsRefused(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	job := f.job.ProviderJobID
	first := delivery{jobID: pathOf(f.job), deliveryID: "d-0", body: callbackBody(job, "running", map[string]any{"progress": 1})}
	second := delivery{jobID: pathOf(f.job), deliveryID: "d-1", body: callbackBody(job, "running", map[string]any{"progress": 2})}
	captured := f.callbackReq(first) // what an eavesdropper keeps
	for i, r := range []req{captured, f.callbackReq(second)} {
		if status, _ := f.do(r).answer(t); status != "accepted" {
			t.Fatalf("delivery %d not accepted", i)
		}
	}
	fp := fingerprintQuery(f.agentTables(t))
	before, err := f.fingerprint(fp)
	if err != nil {
		t.Fatal(err)
	}
	state := f.jobState(f.job.ID)

	// The captured body and signature under a fresh delivery id, with the
	// captured timestamp or a fresh one: the signature does not match.
	replay := captured
	replay.header = maps.Clone(captured.header)
	replay.header[api.HeaderDeliveryID] = "d-replayed"
	res := f.do(replay)
	if res.status != http.StatusUnauthorized || res.problem(t).Code != api.CodeUnauthorized {
		t.Errorf("the captured body under a fresh delivery id = %d %s, want 401", res.status, res.body)
	}
	replay.header[api.HeaderTimestamp] = unix(time.Now())
	if res := f.do(replay); res.status != http.StatusUnauthorized {
		t.Errorf("the captured body under a fresh delivery id and timestamp = %d %s, want 401", res.status, res.body)
	}
	// The captured delivery, whole, later than the window: refused too.
	stale := f.callbackReq(delivery{jobID: pathOf(f.job), deliveryID: "d-0", body: first.body,
		at: time.Now().Add(-api.CallbackTolerance - time.Minute)})
	res = f.do(stale)
	if res.status != http.StatusUnauthorized || !strings.Contains(res.problem(t).Detail, "5 minutes") {
		t.Errorf("the delivery signed 6 minutes ago = %d %s, want 401 saying the timestamp is out of the window", res.status, res.body)
	}
	if after, err := f.fingerprint(fp); err != nil || after != before {
		t.Errorf("replays wrote rows: fingerprint %s, want %s (%v)", after, before, err)
	}
	if after := f.jobState(f.job.ID); after != state {
		t.Errorf("replays moved the job from %+v to %+v", state, after)
	}

	// The same delivery re-sent whole within the window (a redelivery, or
	// a replay of one) is what it always was: a recorded duplicate.
	if status, reason := f.do(captured).answer(t); status != "dropped" || reason != "duplicate" {
		t.Errorf("the captured delivery re-sent within the window = %s %s, want dropped duplicate", status, reason)
	}
	if drops := f.drops(); len(drops) != 1 || drops[0].deliveryID != "d-0" || drops[0].reason != "duplicate" {
		t.Errorf("drops = %+v, want one duplicate of d-0", drops)
	}
	if after := f.jobState(f.job.ID); after != state {
		t.Errorf("the duplicate moved the job from %+v to %+v", state, after)
	}
}
