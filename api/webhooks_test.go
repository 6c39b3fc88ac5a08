package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

type endpointAnswer struct {
	ID             uuid.UUID `json:"id"`
	URL            string    `json:"url"`
	EventTypes     []string  `json:"event_types"`
	Secret         string    `json:"secret"`
	State          string    `json:"state"`
	DisabledReason *string   `json:"disabled_reason"`
}

// TestWebhookEndpointsLifecycle: create (201, with the secret), list
// (no secret), read, disable, enable, the deliveries of a started Run,
// delete; every answer validated against the OpenAPI document; another
// organization sees none of it; bad input is a 400 naming the field.
func TestWebhookEndpointsLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.token = b.adminTokenFor(b.org, "tester") // the endpoints are an admin's
	res := b.do(req{method: http.MethodPost, path: "/v1/webhook-endpoints", body: map[string]any{
		"url": "https://product.example.com/hooks", "description": "ui", "event_types": []string{"run.admitted"}}})
	var ep endpointAnswer
	if res.status != http.StatusCreated {
		t.Fatalf("create = %d %s", res.status, res.body)
	}
	res.decode(t, &ep)
	if !strings.HasPrefix(ep.Secret, "whsec_") || ep.State != "enabled" || res.header.Get("Location") != "/v1/webhook-endpoints/"+ep.ID.String() {
		t.Fatalf("created %+v, Location %q", ep, res.header.Get("Location"))
	}
	path := "/v1/webhook-endpoints/" + ep.ID.String()

	list := b.do(req{method: http.MethodGet, path: "/v1/webhook-endpoints"})
	if list.status != http.StatusOK || strings.Contains(string(list.body), ep.Secret) || !strings.Contains(string(list.body), ep.ID.String()) {
		t.Errorf("list = %d %s", list.status, list.body)
	}
	if got := b.do(req{method: http.MethodGet, path: path}); got.status != http.StatusOK || !strings.Contains(string(got.body), ep.Secret) {
		t.Errorf("read = %d %s", got.status, got.body)
	}

	b.startDirect("webhooks", map[string]any{"kind": "capability", "name": "c", "input": map[string]any{}})
	dl := b.do(req{method: http.MethodGet, path: path + "/deliveries?limit=5"})
	if dl.status != http.StatusOK || !strings.Contains(string(dl.body), `"type":"run.admitted"`) {
		t.Errorf("deliveries = %d %s", dl.status, dl.body)
	}
	b.do(req{method: http.MethodGet, path: path + "/deliveries?limit=0"}).wantProblem(t, http.StatusBadRequest, "validation_failed", "limit 0")

	dis := b.do(req{method: http.MethodPatch, path: path, body: map[string]any{"state": "disabled"}})
	dis.decode(t, &ep)
	if dis.status != http.StatusOK || ep.State != "disabled" || ep.DisabledReason == nil || !strings.Contains(*ep.DisabledReason, "tester") {
		t.Errorf("disable = %d %s", dis.status, dis.body)
	}
	en := b.do(req{method: http.MethodPatch, path: path, body: map[string]any{"state": "enabled", "event_types": []string{}}})
	en.decode(t, &ep)
	if en.status != http.StatusOK || ep.State != "enabled" || len(ep.EventTypes) != 6 {
		t.Errorf("enable = %d %s", en.status, en.body)
	}

	for _, bad := range []struct {
		method, field string
		body          any
	}{
		{http.MethodPost, "url", map[string]any{"url": "http://product.example.com/hooks"}},
		{http.MethodPost, "url", map[string]any{}},
		{http.MethodPost, "event_types", map[string]any{"url": "https://x.example.com", "event_types": []string{"run.exploded"}}},
		{http.MethodPatch, "state", map[string]any{"state": "paused"}},
	} {
		p := "/v1/webhook-endpoints"
		if bad.method == http.MethodPatch {
			p = path
		}
		res := b.do(req{method: bad.method, path: p, body: bad.body})
		res.wantProblem(t, http.StatusBadRequest, "validation_failed", "%s %v", bad.method, bad.body)
		if !strings.Contains(string(res.body), `"`+bad.field+`"`) {
			t.Errorf("%s %v: %s does not name %s", bad.method, bad.body, res.body, bad.field)
		}
	}

	// An endpoint's answers carry its secret: a member of the organization
	// who is not its admin is refused every route, before any SQL.
	member := b.tokenFor(b.org, "member")
	for _, r := range []req{
		{method: http.MethodGet, path: "/v1/webhook-endpoints", token: member},
		{method: http.MethodPost, path: "/v1/webhook-endpoints", body: map[string]any{"url": "https://product.example.com/m"}, token: member},
		{method: http.MethodGet, path: path, token: member},
		{method: http.MethodGet, path: path + "/deliveries", token: member},
		{method: http.MethodPatch, path: path, body: map[string]any{"state": "disabled"}, token: member},
		{method: http.MethodDelete, path: path, token: member},
	} {
		b.do(r).wantProblem(t, http.StatusForbidden, "insufficient_scope", "%s %s by a member", r.method, r.path)
	}

	other := b.adminTokenFor(uuid.New(), "mallory")
	for _, r := range []req{
		{method: http.MethodGet, path: path, token: other},
		{method: http.MethodGet, path: path + "/deliveries", token: other},
		{method: http.MethodPatch, path: path, body: map[string]any{"state": "disabled"}, token: other},
		{method: http.MethodDelete, path: path, token: other},
	} {
		b.do(r).wantProblem(t, http.StatusNotFound, "not_found", "%s %s of another organization", r.method, r.path)
	}
	if res := b.do(req{method: http.MethodDelete, path: path}); res.status != http.StatusNoContent {
		t.Errorf("delete = %d %s", res.status, res.body)
	}
	b.do(req{method: http.MethodGet, path: path}).wantProblem(t, http.StatusNotFound, "not_found", "read after delete")
}
