package api_test

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/servicekeys"
)

// Who opens an operation, beyond a user token: a service key's scope, or
// one of the kinds below that no scope opens.
const (
	accessPublic   = "public"   // no credential at all
	accessCallback = "callback" // a provider's signature
	accessKeyAdmin = "admin"    // an admin's or an operator's token; no service key
)

// operationAccess says, for every operation of api/openapi.json, who
// opens it: the scope of a service key, or a kind no key opens. It is the
// specification TestEveryOperationChecksItsScope holds the server and the
// document to; an operation added without an entry fails it.
var operationAccess = map[string]string{
	"GET /healthz": accessPublic, "HEAD /healthz": accessPublic,
	"GET /readyz": accessPublic, "HEAD /readyz": accessPublic,
	"GET /openapi.json": accessPublic, "HEAD /openapi.json": accessPublic,
	"GET /docs": accessPublic, "HEAD /docs": accessPublic,
	"GET /metrics": accessPublic, "HEAD /metrics": accessPublic,
	"GET /problems": accessPublic, "HEAD /problems": accessPublic,
	"GET /problems/{code}": accessPublic, "HEAD /problems/{code}": accessPublic,
	"POST /v1/callbacks/{provider}/jobs/{job_id}": accessCallback,

	"POST /v1/saved-searches":                      string(servicekeys.ScopeStartsWrite),
	"GET /v1/saved-searches":                       string(servicekeys.ScopeRead),
	"HEAD /v1/saved-searches":                      string(servicekeys.ScopeRead),
	"GET /v1/saved-searches/{id}":                  string(servicekeys.ScopeRead),
	"HEAD /v1/saved-searches/{id}":                 string(servicekeys.ScopeRead),
	"PATCH /v1/saved-searches/{id}":                string(servicekeys.ScopeStartsWrite),
	"DELETE /v1/saved-searches/{id}":               string(servicekeys.ScopeStartsWrite),
	"PUT /v1/saved-searches/{id}/baseline":         string(servicekeys.ScopeStartsWrite),
	"POST /v1/saved-searches/{id}/start":           string(servicekeys.ScopeStartsWrite),
	"GET /v1/saved-searches/{id}/snapshots":        string(servicekeys.ScopeRead),
	"HEAD /v1/saved-searches/{id}/snapshots":       string(servicekeys.ScopeRead),
	"GET /v1/saved-searches/{id}/schedule":         string(servicekeys.ScopeRead),
	"HEAD /v1/saved-searches/{id}/schedule":        string(servicekeys.ScopeRead),
	"PUT /v1/saved-searches/{id}/schedule":         string(servicekeys.ScopeStartsWrite),
	"DELETE /v1/saved-searches/{id}/schedule":      string(servicekeys.ScopeStartsWrite),
	"POST /v1/saved-searches/{id}/schedule/pause":  string(servicekeys.ScopeStartsWrite),
	"POST /v1/saved-searches/{id}/schedule/resume": string(servicekeys.ScopeStartsWrite),
	"GET /v1/saved-searches/{id}/occurrences":      string(servicekeys.ScopeRead),
	"HEAD /v1/saved-searches/{id}/occurrences":     string(servicekeys.ScopeRead),
	"POST /v1/runs":                                string(servicekeys.ScopeStartsWrite),
	"GET /v1/runs":                                 string(servicekeys.ScopeRead),
	"HEAD /v1/runs":                                string(servicekeys.ScopeRead),
	"GET /v1/runs/{id}":                            string(servicekeys.ScopeRead),
	"HEAD /v1/runs/{id}":                           string(servicekeys.ScopeRead),
	"GET /v1/runs/{id}/events":                     string(servicekeys.ScopeRead),
	"HEAD /v1/runs/{id}/events":                    string(servicekeys.ScopeRead),
	"POST /v1/runs/{id}/cancel":                    string(servicekeys.ScopeStartsWrite),
	"PUT /v1/runs/{id}/status":                     string(servicekeys.ScopeRunsReport),
	"GET /v1/snapshots/{id}":                       string(servicekeys.ScopeRead),
	"HEAD /v1/snapshots/{id}":                      string(servicekeys.ScopeRead),
	"POST /v1/provider-jobs":                       string(servicekeys.ScopeStartsWrite),
	"GET /v1/provider-jobs/{id}":                   string(servicekeys.ScopeRead),
	"HEAD /v1/provider-jobs/{id}":                  string(servicekeys.ScopeRead),
	"GET /v1/provider-jobs/{id}/drops":             string(servicekeys.ScopeRead),
	"HEAD /v1/provider-jobs/{id}/drops":            string(servicekeys.ScopeRead),
	"POST /v1/webhook-endpoints":                   accessKeyAdmin,
	"GET /v1/webhook-endpoints":                    accessKeyAdmin,
	"HEAD /v1/webhook-endpoints":                   accessKeyAdmin,
	"GET /v1/webhook-endpoints/{id}":               accessKeyAdmin,
	"HEAD /v1/webhook-endpoints/{id}":              accessKeyAdmin,
	"PATCH /v1/webhook-endpoints/{id}":             accessKeyAdmin,
	"DELETE /v1/webhook-endpoints/{id}":            accessKeyAdmin,
	"GET /v1/webhook-endpoints/{id}/deliveries":    accessKeyAdmin,
	"HEAD /v1/webhook-endpoints/{id}/deliveries":   accessKeyAdmin,
	"POST /v1/service-keys":                        accessKeyAdmin,
	"GET /v1/service-keys":                         accessKeyAdmin,
	"HEAD /v1/service-keys":                        accessKeyAdmin,
	"DELETE /v1/service-keys/{id}":                 accessKeyAdmin,
}

// operation is one operation of the OpenAPI document.
type operation struct {
	method, path string // path as the document writes it: {id}
	op           *openapi3.Operation
}

func (o operation) String() string { return o.method + " " + o.path }

// route is the router's route of o: {name} becomes :name.
func (o operation) route() route {
	return route{o.method, regexp.MustCompile(`\{([a-z_]+)\}`).ReplaceAllString(o.path, ":$1")}
}

// operations returns every operation of the OpenAPI document, sorted.
func operations(t *testing.T) []operation {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	var out []operation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			out = append(out, operation{method, path, op})
		}
	}
	slices.SortFunc(out, func(a, b operation) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// keyScopes returns the service-key scopes the document's security of op
// names (serviceKey), or nil when no key opens it.
func keyScopes(op *openapi3.Operation) []string {
	if op.Security == nil {
		return nil
	}
	for _, req := range *op.Security {
		if s, ok := req["serviceKey"]; ok {
			return s
		}
	}
	return nil
}

// TestEveryOperationChecksItsScope holds every operation of the OpenAPI
// document to operationAccess: a service key with a single scope gets
// past authentication (neither 401 nor 403, nor 5xx) exactly on the
// operations of its scope, and 403 insufficient_scope on every other
// operation that takes a bearer token, the management of keys included.
// The document's security says the same scope. An operation without an
// entry fails, so a route cannot be added without deciding its scope.
func TestEveryOperationChecksItsScope(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	keys := map[servicekeys.Scope]string{}
	for _, sc := range servicekeys.Scopes() {
		keys[sc] = w.keyFor(w.org, sc)
	}
	ops := operations(t)
	documented := map[string]bool{}
	for _, o := range ops {
		documented[o.String()] = true
	}
	for name := range operationAccess {
		if !documented[name] {
			t.Errorf("operationAccess names %s, which the OpenAPI document does not have", name)
		}
	}
	// Writes last, so a read sees the world as seeded; the archive of
	// the saved search at the very end.
	slices.SortStableFunc(ops, func(a, b operation) int {
		return rank(a) - rank(b)
	})
	for _, o := range ops {
		access, ok := operationAccess[o.String()]
		if !ok {
			t.Errorf("no entry for %s in operationAccess: decide which service-key scope opens it", o)
			continue
		}
		if access == accessPublic || access == accessCallback {
			continue
		}
		if got, want := keyScopes(o.op), wantScopes(access); !slices.Equal(got, want) {
			t.Errorf("the OpenAPI security of %s names the key scopes %q, want %q", o, got, want)
		}
		for _, sc := range servicekeys.Scopes() {
			rq := w.validRequest(o.route())
			rq.token = keys[sc]
			res := w.do(rq)
			if string(sc) == access {
				if res.status == http.StatusUnauthorized || res.status == http.StatusForbidden || res.status >= 500 {
					t.Errorf("%s with a %s key = %d %s, want it opened", o, sc, res.status, res.body)
				}
				continue
			}
			wantInsufficientScope(t, fmt.Sprintf("%s with a %s key", o, sc), res)
		}
	}
}

// rank orders operations for TestEveryOperationChecksItsScope: reads,
// then writes, then the removals.
func rank(o operation) int {
	switch o.method {
	case http.MethodGet, http.MethodHead:
		return 0
	case http.MethodDelete:
		return 2
	}
	return 1
}

// wantScopes is the serviceKey security an operation of access declares.
func wantScopes(access string) []string {
	if access == accessKeyAdmin {
		return nil
	}
	return []string{access}
}

func wantInsufficientScope(t *testing.T, name string, res *response) {
	t.Helper()
	if res.status != http.StatusForbidden || !strings.Contains(res.header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
		t.Errorf("%s = %d %s, want 403 insufficient_scope", name, res.status, res.body)
		return
	}
	if len(res.body) > 0 && res.problem(t).Code != api.CodeInsufficientScope {
		t.Errorf("%s: code %s, want insufficient_scope", name, res.problem(t).Code)
	}
}

// TestAKeyOpensNoOtherOrganizationsRecords aims a key of organization B
// with every scope at each of organization A's resources: every route with
// an id answers 404 and writes nothing, as B's user token does; the
// admin's routes (keys, webhook endpoints) answer 403, as they do to every
// key.
func TestAKeyOpensNoOtherOrganizationsRecords(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	other := w.keyFor(w.otherOrg, servicekeys.Scopes()...)
	// Its first use records last_used_at (a write of B's own row); the
	// next, within servicekeys.LastUsedInterval, none.
	if res := w.do(req{method: http.MethodGet, path: "/v1/runs", token: other}); res.status != http.StatusOK {
		t.Fatalf("B's key on its own runs = %d %s", res.status, res.body)
	}
	fp := fingerprintQuery(w.agentTables(t))
	for _, r := range w.bearerRoutes(t) {
		rq := w.validRequest(r)
		rq.token = other
		before, err := w.fingerprint(fp)
		if err != nil {
			t.Fatal(err)
		}
		res := w.do(rq)
		switch {
		case strings.HasPrefix(r.path, "/v1/service-keys"), strings.HasPrefix(r.path, "/v1/webhook-endpoints"):
			wantInsufficientScope(t, "B's key on "+r.String(), res)
		case r.params() > 0 || r.String() == "POST /v1/provider-jobs": // the body names A's Run
			if res.status != http.StatusNotFound {
				t.Errorf("B's key on A's %s = %d %s, want 404", r, res.status, res.body)
			}
		case r.method == http.MethodGet:
			w.wantNoneOfA(t, res)
		default:
			continue // a create: B's own record
		}
		if after, err := w.fingerprint(fp); err != nil || after != before {
			t.Errorf("B's key on %s wrote rows: fingerprint %s, want %s (%v)", r, after, before, err)
		}
	}
}

// TestKeyManagementIsAnAdminsOrAnOperators drives the key routes with
// every kind of caller: an admin and an operator naming the organization
// manage keys; a user, a runtime and a key of every scope are refused.
// A created key works at once and its token is never listed; a revoked
// one is refused once the bound has passed, by a second server on the
// same database too; revoking again changes nothing.
func TestKeyManagementIsAnAdminsOrAnOperators(t *testing.T) {
	t.Parallel()
	clk := dbclocktest.New(time.Now())
	b := setup(t, setupOpts{clock: clk.Clock()})
	// A second replica: its own server, verifier and cache, on the same
	// database and clock.
	replica := setup(t, setupOpts{pool: b.pool, clock: clk.Clock()})
	operator := b.sign(auth.SignOperatorToken, b.org, "olga")
	admin := b.adminTokenFor(b.org, "ada")
	for name, tok := range map[string]string{
		"user": b.token, "runtime": b.runtimeTokenFor(b.org, "rt"),
		"key with every scope": b.keyFor(b.org, servicekeys.Scopes()...),
	} {
		for _, rq := range []req{
			{method: http.MethodPost, path: "/v1/service-keys", body: `{"name":"n","scopes":["read"]}`},
			{method: http.MethodGet, path: "/v1/service-keys"},
			{method: http.MethodDelete, path: "/v1/service-keys/" + uuid.NewString()},
		} {
			rq.token = tok
			wantInsufficientScope(t, name+" on "+rq.method+" "+rq.path, b.do(rq))
		}
	}
	var created struct {
		servicekeys.Key
		Token string
	}
	res := b.do(req{method: http.MethodPost, path: "/v1/service-keys", token: admin,
		body: `{"name":"runtime eu-1","scopes":["runs:report","read"]}`})
	if res.status != http.StatusCreated || res.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("admin's create = %d %s (Cache-Control %q), want 201 no-store", res.status, res.body, res.header.Get("Cache-Control"))
	}
	res.decode(t, &created)
	if created.CreatedBy != "ada" || created.OrganizationID != b.org || !strings.HasPrefix(created.Token, "sdk_") {
		t.Errorf("created = %+v, want ada's key of %s with its token", created, b.org)
	}
	for _, srv := range []*bundle{b, replica} {
		if res := srv.do(req{method: http.MethodGet, path: "/v1/runs", token: created.Token}); res.status != http.StatusOK {
			t.Fatalf("the new key on GET /v1/runs = %d %s", res.status, res.body)
		}
	}
	list := b.do(req{method: http.MethodGet, path: "/v1/service-keys", token: operator})
	if list.status != http.StatusOK || !strings.Contains(string(list.body), created.ID.String()) ||
		strings.Contains(string(list.body), created.Token[len("sdk_")+32+1+8+1:]) {
		t.Errorf("operator's list = %d %s, want the key without its secret", list.status, list.body)
	}
	// Revoked through replica b; the other replica still has it cached.
	rv := b.do(req{method: http.MethodDelete, path: "/v1/service-keys/" + created.ID.String(), token: operator})
	var revoked servicekeys.Key
	rv.decode(t, &revoked)
	if rv.status != http.StatusOK || revoked.RevokedAt == nil || *revoked.RevokedBy != "olga" {
		t.Fatalf("operator's revoke = %d %s", rv.status, rv.body)
	}
	verifiedAt := clk.Now()
	for {
		res := replica.do(req{method: http.MethodGet, path: "/v1/runs", token: created.Token})
		if res.status == http.StatusUnauthorized {
			break
		}
		if res.status != http.StatusOK {
			t.Fatalf("the replica = %d %s", res.status, res.body)
		}
		if clk.Now().Sub(verifiedAt) > servicekeys.RevocationBound {
			t.Fatalf("the replica still accepts the key %s after its revocation; the bound is %s",
				clk.Now().Sub(verifiedAt), servicekeys.RevocationBound)
		}
		clk.Advance(250 * time.Millisecond)
	}
	again := b.do(req{method: http.MethodDelete, path: "/v1/service-keys/" + created.ID.String(), token: admin})
	var still servicekeys.Key
	again.decode(t, &still)
	if again.status != http.StatusOK || !still.RevokedAt.Equal(*revoked.RevokedAt) || *still.RevokedBy != "olga" {
		t.Errorf("revoking again = %d %s, want the first revocation kept", again.status, again.body)
	}
	// Another organization's admin cannot revoke it, nor see it.
	otherAdmin := b.adminTokenFor(uuid.New(), "eve")
	b.do(req{method: http.MethodDelete, path: "/v1/service-keys/" + created.ID.String(), token: otherAdmin}).
		wantProblem(t, http.StatusNotFound, api.CodeNotFound, "another organization's admin revoking the key")
	for _, bad := range []string{`{"name":"","scopes":["read"]}`, `{"name":"n","scopes":["admin"]}`, `{"name":"n","scopes":[]}`,
		`{"name":"n","scopes":["read"],"expires_at":"tomorrow"}`, `{"name":"n","scopes":["read"],"expires_at":"2001-01-01T00:00:00Z"}`} {
		b.do(req{method: http.MethodPost, path: "/v1/service-keys", token: admin, body: bad}).
			wantProblem(t, http.StatusBadRequest, api.CodeValidationFailed, "create %s", bad)
	}
}

// TestAnExpiredKeyIsRefused: a key is refused once its expiry has passed,
// however recently it was accepted.
func TestAnExpiredServiceKeyIsRefused(t *testing.T) {
	t.Parallel()
	clk := dbclocktest.New(time.Now())
	b := setup(t, setupOpts{clock: clk.Clock()})
	exp := clk.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)
	res := b.do(req{method: http.MethodPost, path: "/v1/service-keys", token: b.adminTokenFor(b.org, "ada"),
		body: `{"name":"short","scopes":["read"],"expires_at":"` + exp + `"}`})
	var created struct{ Token string }
	res.decode(t, &created)
	if res.status != http.StatusCreated {
		t.Fatalf("create = %d %s", res.status, res.body)
	}
	if res := b.do(req{method: http.MethodGet, path: "/v1/runs", token: created.Token}); res.status != http.StatusOK {
		t.Fatalf("before its expiry = %d %s", res.status, res.body)
	}
	clk.Advance(time.Minute)
	wantUnauthorized(t, "a key at its expiry", b.do(req{method: http.MethodGet, path: "/v1/runs", token: created.Token}))
}
