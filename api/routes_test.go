package api_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/savedsearch"
)

// This file holds what the security tests and the endpoint fuzz target
// share: the routes as the router registers them, a world of resources in
// two organizations, the credentials a client can get wrong, and a
// fingerprint of every agent.* table.

// route is one route of the router: a method and an echo path whose
// parameters are written :name.
type route struct{ method, path string }

func (r route) String() string { return r.method + " " + r.path }

// publicRoutes answer without any credential. A route missing from the
// router is allowed (/metrics is served only when something mounts it).
var publicRoutes = map[string]bool{
	"GET /healthz":      true,
	"GET /readyz":       true,
	"GET /openapi.json": true,
	"GET /docs":         true,
	"GET /metrics":      true,
	// The documentation of the problem types, which every problem's type
	// names.
	"GET /problems":       true,
	"GET /problems/:code": true,
}

// callbackRoute authenticates by a Standard Webhooks signature instead of a
// bearer token; its own tests (providerjobs_test.go, security_test.go)
// cover it.
const callbackRoute = "POST /v1/callbacks/:provider/jobs/:job_id"

// runtimeRoute takes a runtime credential instead of a user token: the
// world sends organization A's (or B's) runtime credential there.
const runtimeRoute = "PUT /v1/runs/:id/status"

// routes returns the routes the server registers, sorted, without echo's
// own catch-alls for a group's middleware, and without the HEAD route of
// each GET route: it runs the GET's handler and middleware, and
// TestHeadAnswersEveryGetRoute checks it against its GET.
func (b *bundle) routes() []route {
	var out []route
	for _, r := range b.api.Handler().(*echo.Echo).Routes() {
		if strings.HasPrefix(r.Method, "echo_") || strings.HasSuffix(r.Path, "*") || r.Path == "/v1" ||
			r.Method == http.MethodHead {
			continue
		}
		out = append(out, route{r.Method, r.Path})
	}
	slices.SortFunc(out, func(a, b route) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out)
}

// bearerRoutes are the routes that must demand a bearer token: all but
// the public ones and the callback.
func (b *bundle) bearerRoutes(t testing.TB) []route {
	t.Helper()
	var out []route
	sawCallback := false
	for _, r := range b.routes() {
		switch {
		case publicRoutes[r.String()]:
		case r.String() == callbackRoute:
			sawCallback = true
		default:
			out = append(out, r)
		}
	}
	if !sawCallback {
		t.Fatalf("the router has no %s: update callbackRoute, so the callback keeps its own coverage and no other route is excused", callbackRoute)
	}
	if len(out) == 0 {
		t.Fatal("the router lists no bearer routes: the enumeration is broken")
	}
	return out
}

// world is a server with resources of every kind in organization A (the
// bundle's) and a second organization B with its own token.
type world struct {
	*bundle
	ss        *savedsearch.SavedSearch
	runID     uuid.UUID // the Run of a saved-search start
	snapshot  uuid.UUID // its snapshot
	directRun uuid.UUID // a Run of a direct start
	job       *providerjobs.Job
	endpoint  uuid.UUID // a webhook endpoint
	otherOrg  uuid.UUID
	other     string // a valid token of otherOrg
	// runtime and otherRuntime are runtime credentials of A and of B.
	runtime, otherRuntime string
	// admin and otherAdmin are admins' tokens of A and of B; key is a
	// service key of A (all scopes), keyID its id.
	admin, otherAdmin string
	keyID             uuid.UUID
}

func newWorld(t testing.TB, opts setupOpts) *world {
	t.Helper()
	b := setup(t, opts)
	w := &world{bundle: b, ss: b.seedSavedSearch(seedOpts{items: []string{"seen"}}), otherOrg: uuid.New()}
	w.other = b.tokenFor(w.otherOrg, "intruder")
	w.runtime, w.otherRuntime = b.runtimeTokenFor(b.org, "runtime-a"), b.runtimeTokenFor(w.otherOrg, "runtime-b")
	w.admin, w.otherAdmin = b.adminTokenFor(b.org, "admin-a"), b.adminTokenFor(w.otherOrg, "admin-b")
	var started, direct struct {
		Run      struct{ ID uuid.UUID } `json:"run"`
		Snapshot struct{ ID uuid.UUID } `json:"snapshot"`
	}
	res := b.start(w.ss.ID, "world", nil)
	if err := json.Unmarshal(res.body, &started); err != nil || res.status != http.StatusCreated {
		t.Fatalf("seeding a start: %d %s", res.status, res.body)
	}
	res = b.startDirect("world-direct", `{"kind":"definition","name":"world"}`)
	if err := json.Unmarshal(res.body, &direct); err != nil || res.status != http.StatusCreated {
		t.Fatalf("seeding a direct start: %d %s", res.status, res.body)
	}
	w.runID, w.snapshot, w.directRun = started.Run.ID, started.Snapshot.ID, direct.Run.ID
	w.job = b.seedJob("world-job")
	var key struct{ ID uuid.UUID }
	res = b.do(req{method: http.MethodPost, path: "/v1/service-keys", token: w.admin,
		body: `{"name":"world","scopes":["read"]}`})
	if err := json.Unmarshal(res.body, &key); err != nil || res.status != http.StatusCreated {
		t.Fatalf("seeding a service key: %d %s", res.status, res.body)
	}
	w.keyID = key.ID
	var ep struct{ ID uuid.UUID }
	res = b.do(req{method: http.MethodPost, path: "/v1/webhook-endpoints", token: w.admin, body: `{"url":"https://product.example.com/hooks"}`})
	if err := json.Unmarshal(res.body, &ep); err != nil || res.status != http.StatusCreated {
		t.Fatalf("seeding a webhook endpoint: %d %s", res.status, res.body)
	}
	w.endpoint = ep.ID
	if res := b.do(req{method: http.MethodPut, path: "/v1/saved-searches/" + w.ss.ID.String() + "/schedule",
		body: `{"interval_seconds":3600}`}); res.status != http.StatusCreated {
		t.Fatalf("seeding a schedule: %d %s", res.status, res.body)
	}
	return w
}

// resourceID returns organization A's resource a route's :id names, by the
// collection the path starts with, or "" for a collection this file does
// not know.
func (w *world) resourceID(path string) string {
	switch {
	case strings.HasPrefix(path, "/v1/saved-searches/"):
		return w.ss.ID.String()
	case strings.HasPrefix(path, "/v1/runs/"):
		return w.runID.String()
	case strings.HasPrefix(path, "/v1/snapshots/"):
		return w.snapshot.String()
	case strings.HasPrefix(path, "/v1/provider-jobs/"):
		return w.job.ID.String()
	case strings.HasPrefix(path, "/v1/service-keys/"):
		return w.keyID.String()
	case strings.HasPrefix(path, "/v1/webhook-endpoints/"):
		return w.endpoint.String()
	}
	return ""
}

// url returns the request path of r with its parameters filled: by
// values, in the order the parameters appear, where values has one, else
// by organization A's resource. Values are path-escaped.
func (w *world) url(r route, values ...string) string {
	segments := strings.Split(r.path, "/")
	n := 0
	for i, s := range segments {
		name, ok := strings.CutPrefix(s, ":")
		if !ok {
			continue
		}
		var v string
		switch name {
		case "provider":
			v = acme
		case "job_id":
			v = pathOf(w.job)
		case "code":
			v = "in_progress" // a problem type's page
		default:
			if v = w.resourceID(r.path); v == "" {
				v = uuid.NewString() // names nothing
			}
		}
		if n < len(values) && values[n] != "" {
			v = values[n]
		}
		n++
		segments[i] = url.PathEscape(v)
	}
	return strings.Join(segments, "/")
}

// params counts the path parameters of r.
func (r route) params() int { return strings.Count(r.path, "/:") }

// validRequest returns a request organization A may send on r that the
// server accepts (or, for a route this file does not know, an empty one),
// with a fresh Idempotency-Key and the bundle's token.
func (w *world) validRequest(r route) req {
	rq := req{method: r.method, path: w.url(r), header: map[string]string{"Idempotency-Key": "k-" + uuid.NewString()}}
	if strings.HasPrefix(r.path, "/v1/webhook-endpoints") {
		rq.token = w.admin // an admin's route
	}
	switch r.String() {
	case "POST /v1/saved-searches":
		rq.body = `{"name":"n","brief":{"query":"q"}}`
	case "PATCH /v1/saved-searches/:id":
		rq.body = `{"name":"renamed"}`
	case "PUT /v1/saved-searches/:id/baseline":
		rq.body = `{"items":["a","b"]}`
	case "POST /v1/saved-searches/:id/start":
		rq.body = `{"max_results":5}`
	case "PUT /v1/saved-searches/:id/schedule":
		rq.body = `{"interval_seconds":3600}`
	case "POST /v1/runs":
		rq.body = `{"kind":"capability","name":"c","input":{"a":1}}`
	case "POST /v1/webhook-endpoints":
		rq.body = `{"url":"https://product.example.com/other"}`
	case "PATCH /v1/webhook-endpoints/:id":
		rq.body = `{"description":"changed"}`
	case "POST /v1/provider-jobs":
		rq.body = fmt.Sprintf(`{"run_id":%q,"provider":%q,"provider_job_id":%q}`, w.runID, acme, "job-"+uuid.NewString())
	case runtimeRoute:
		rq.body = `{"status":"running"}`
		rq.token = w.runtime
	case "POST /v1/service-keys":
		rq.body = `{"name":"another","scopes":["read","starts:write"]}`
		rq.token = w.admin
	case "GET /v1/service-keys", "DELETE /v1/service-keys/:id":
		rq.token = w.admin
	case "POST /v1/saved-searches/:id/schedule/pause", "POST /v1/saved-searches/:id/schedule/resume":
		// They take no body (a body is 413).
	case callbackRoute:
		rq.noAuth = true
		body := callbackBody(w.job.ProviderJobID, "running", map[string]any{"p": 1})
		rq.body = body
		maps.Copy(rq.header, signedHeaders(acmeSecret, "d-"+uuid.NewString(), body))
	default:
		if r.method == http.MethodPost || r.method == http.MethodPut || r.method == http.MethodPatch {
			rq.body = `{}`
		}
	}
	return rq
}

// credential is an Authorization header value; "" sends none.
type credential struct{ name, header string }

// rsaKey and ecKey sign the tokens of algorithms the server must refuse.
var (
	rsaKey = sync.OnceValue(func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	})
	ecKey = sync.OnceValue(func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

// badCredentials returns every way a client can fail to authenticate as
// org: each must answer 401 unauthorized on every bearer route.
func badCredentials(t testing.TB, org uuid.UUID) []credential {
	t.Helper()
	now := time.Now()
	valid := jwt.MapClaims{"org_id": org.String(), "sub": "mallory", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := maps.Clone(valid)
		edit(c)
		return c
	}
	sign := func(m jwt.SigningMethod, key any, c jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(m, c).SignedString(key)
		if err != nil {
			t.Fatalf("signing with %s: %v", m.Alg(), err)
		}
		return "Bearer " + tok
	}
	enc := base64.RawURLEncoding.EncodeToString
	claims, _ := json.Marshal(valid)
	algNone := enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(claims) + "."
	// alg none, but carrying the signature a valid HS256 token has: a
	// parser that trusted the header would skip checking it.
	hs := strings.TrimPrefix(sign(jwt.SigningMethodHS256, testSecret, valid), "Bearer ")
	algNoneSigned := enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(claims) + "." + hs[strings.LastIndexByte(hs, '.')+1:]
	return []credential{
		{"no token", ""},
		{"expired", sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Second).Unix() }))},
		{"signed with another secret", sign(jwt.SigningMethodHS256, []byte("not-the-server-secret-not-the-server-secret"), valid)},
		{"alg none", "Bearer " + algNone},
		{"alg None with a signature", "Bearer " + strings.Replace(algNoneSigned, enc([]byte(`{"alg":"none","typ":"JWT"}`)), enc([]byte(`{"alg":"None","typ":"JWT"}`)), 1)},
		{"alg none with an HS256 signature", "Bearer " + algNoneSigned},
		{"RS256", sign(jwt.SigningMethodRS256, rsaKey(), valid)},
		{"ES256", sign(jwt.SigningMethodES256, ecKey(), valid)},
		{"HS384 with the server secret", sign(jwt.SigningMethodHS384, testSecret, valid)},
		{"HS512 with the server secret", sign(jwt.SigningMethodHS512, testSecret, valid)},
		{"no org_id", sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { delete(c, "org_id") }))},
		{"no exp", sign(jwt.SigningMethodHS256, testSecret, with(func(c jwt.MapClaims) { delete(c, "exp") }))},
		{"token in Basic", "Basic " + strings.TrimPrefix(sign(jwt.SigningMethodHS256, testSecret, valid), "Bearer ")},
		{"the secret itself", "Bearer " + string(testSecret)},
	}
}

// agentTables returns the base tables of schema agent, by name.
func (b *bundle) agentTables(t testing.TB) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(),
		`SELECT table_name FROM information_schema.tables WHERE table_schema = 'agent' AND table_type = 'BASE TABLE' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"saved_searches", "saved_search_baselines", "saved_search_snapshots",
		"runs", "idempotency_keys", "provider_jobs", "webhook_drops"} {
		if !slices.Contains(names, want) {
			t.Fatalf("agent tables %v lack %s", names, want)
		}
	}
	return names
}

// fingerprintQuery returns one statement that answers a text naming, for
// every table, its row count and the sum of its rows' xmins. A committed
// insert adds a row, a delete removes one and an update replaces a row
// version with one whose transaction id is newer, so larger, so any
// committed write changes the fingerprint; a rolled-back one does not. A
// sum, not the newest xmin: on a cluster each worker hands out its own
// transaction ids, and an update on one may stay below the newest row of
// another.
func fingerprintQuery(tables []string) string {
	parts := make([]string, len(tables))
	for i, name := range tables {
		parts[i] = fmt.Sprintf(`(SELECT '%s:' || count(*) || '/' || coalesce(sum(xmin::text::bigint), 0) FROM %s)`,
			strings.ReplaceAll(name, "'", "''"), pgx.Identifier{"agent", name}.Sanitize())
	}
	return "SELECT concat_ws(' ', " + strings.Join(parts, ", ") + ")"
}

// fingerprint runs a fingerprintQuery.
func (b *bundle) fingerprint(query string) (string, error) {
	var fp string
	err := b.pool.QueryRow(context.Background(), query).Scan(&fp)
	return fp, err
}

// TestFingerprintSeesEveryWrite keeps the no-write checks honest: a
// committed insert, update or delete changes the fingerprint, a rolled-back
// write and a read do not.
func TestFingerprintSeesEveryWrite(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	fp := fingerprintQuery(w.agentTables(t))
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		sql    string
		change bool
	}{
		{"a read", `SELECT count(*) FROM agent.saved_searches`, false},
		// Of one organization: a cluster locks rows in a statement
		// routed to one shard.
		{"a locking read", fmt.Sprintf(`SELECT id FROM agent.saved_searches WHERE organization_id = '%s' FOR UPDATE`, w.org), false},
		{"an update", `UPDATE agent.saved_searches SET name = name || '!'`, true},
		{"an update to the same value", `UPDATE agent.provider_jobs SET status = status`, true},
		{"an insert", `INSERT INTO agent.webhook_drops (id, provider, path_job_id, delivery_id, request_hash, reason, received_at)
			VALUES (gen_random_uuid(), 'acme', 'j', 'd', repeat('0', 64), 'unknown_job', now())`, true},
		{"a delete", `DELETE FROM agent.webhook_drops`, true},
	} {
		before, err := w.fingerprint(fp)
		if err != nil {
			t.Fatal(err)
		}
		// Rolled back, it leaves no trace.
		tx, err := w.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, tt.sql)
		if rerr := tx.Rollback(ctx); err != nil || rerr != nil {
			t.Fatalf("%s: %v, rollback: %v", tt.name, err, rerr)
		}
		if after, _ := w.fingerprint(fp); after != before {
			t.Errorf("%s rolled back changed the fingerprint %s to %s", tt.name, before, after)
		}
		if _, err := w.pool.Exec(ctx, tt.sql); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if after, _ := w.fingerprint(fp); (after != before) != tt.change {
			t.Errorf("%s: fingerprint %s, then %s; want a change %v", tt.name, before, after, tt.change)
		}
	}
}
