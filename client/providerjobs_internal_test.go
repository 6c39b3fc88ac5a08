package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/api"
)

func TestRegisterProviderJobSendsTheParamsAndReportsCreated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status      int
		wantCreated bool
	}{
		{http.StatusCreated, true},
		{http.StatusOK, false},
	}
	for _, tt := range tests {
		f, ts := serve(t, registered(tt.status))
		c, _ := newTestClient(t, ts.URL, RetryPolicy{})
		res, err := c.RegisterProviderJob(context.Background(), registerParams)
		if err != nil {
			t.Fatalf("RegisterProviderJob answered %d: %v", tt.status, err)
		}
		if res.Created != tt.wantCreated || res.Attempts != 1 {
			t.Errorf("RegisterProviderJob answered %d = created %v in %d attempts, want created %v in 1",
				tt.status, res.Created, res.Attempts, tt.wantCreated)
		}
		want := ProviderJob{
			ID: "3e0c7a1b-2d4f-4a6b-8c9d-0e1f2a3b4c55", OrganizationID: "0b7e2d5c-8f07-4b6f-a3a5-77d8d0e1f9c2",
			RunID: "8c0b9a8e-7b2c-4d0f-9d38-3f6d2f1f2a11", Provider: "acme", ProviderJobID: "acme-1", Status: "pending",
			Version: 1, CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), UpdatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
			CallbackPath: "/v1/callbacks/acme/jobs/3e0c7a1b-2d4f-4a6b-8c9d-0e1f2a3b4c55",
		}
		if !reflect.DeepEqual(res.Job, want) {
			t.Errorf("RegisterProviderJob job = %+v, want %+v", res.Job, want)
		}
		reqs := f.requests()
		if len(reqs) != 1 {
			t.Fatalf("made %d requests, want 1", len(reqs))
		}
		r := reqs[0]
		if r.method != http.MethodPost || r.path != "/v1/provider-jobs" || r.key == "" ||
			r.body != `{"run_id":"8c0b9a8e-7b2c-4d0f-9d38-3f6d2f1f2a11","provider":"acme","provider_job_id":"acme-1"}` {
			t.Errorf("request %s %s key %q body %s, want POST /v1/provider-jobs with a key and the params", r.method, r.path, r.key, r.body)
		}
	}
}

func TestProviderJobResultKeepsNumbersExact(t *testing.T) {
	t.Parallel()
	body := strings.Replace(providerJobJSON, `"result":null`,
		`"result":{"pages":12345678901234567890,"ratio":1.50,"parts":[{"n":-0}],"note":null}`, 1)
	f, ts := serve(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
	c, _ := newTestClient(t, ts.URL, RetryPolicy{})
	job, err := c.GetProviderJob(context.Background(), "3e0c7a1b-2d4f-4a6b-8c9d-0e1f2a3b4c55")
	if err != nil {
		t.Fatalf("GetProviderJob: %v", err)
	}
	want := map[string]any{
		"pages": json.Number("12345678901234567890"),
		"ratio": json.Number("1.50"),
		"parts": []any{map[string]any{"n": json.Number("-0")}},
		"note":  nil,
	}
	if !reflect.DeepEqual(job.Result, want) {
		t.Errorf("GetProviderJob result = %#v, want %#v", job.Result, want)
	}
	if r := f.requests()[0]; r.method != http.MethodGet || r.path != "/v1/provider-jobs/3e0c7a1b-2d4f-4a6b-8c9d-0e1f2a3b4c55" {
		t.Errorf("request %s %s, want GET of the job", r.method, r.path)
	}
}

func TestGetProviderJobChecksTheIDBeforeSending(t *testing.T) {
	t.Parallel()
	f, ts := serve(t, registered(http.StatusOK))
	c, _ := newTestClient(t, ts.URL, RetryPolicy{})
	if _, err := c.GetProviderJob(context.Background(), ""); !errors.Is(err, errEmptyID) {
		t.Errorf("GetProviderJob(\"\") error = %v, want errEmptyID", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("made %d requests, want none", n)
	}
	if _, err := c.GetProviderJob(context.Background(), "a/b"); err != nil {
		t.Fatalf("GetProviderJob: %v", err)
	}
	if r := f.requests()[0]; r.path != "/v1/provider-jobs/a%2Fb" {
		t.Errorf("request %s, want the id escaped", r.path)
	}
}

// TestProviderJobTypesMirrorTheAPISchema holds the JSON names of the
// provider job types to the API's own OpenAPI document, so that neither
// can change without the other.
func TestProviderJobTypesMirrorTheAPISchema(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("reading the OpenAPI document: %v", err)
	}
	tests := []struct {
		schema string
		typ    reflect.Type
	}{
		{"ProviderJob", reflect.TypeFor[ProviderJob]()},
		{"ProviderJobCreate", reflect.TypeFor[RegisterProviderJobParams]()},
	}
	for _, tt := range tests {
		schema, ok := doc.Components.Schemas[tt.schema]
		if !ok {
			t.Fatalf("the OpenAPI document has no schema %s", tt.schema)
		}
		var props []string
		for name := range schema.Properties {
			props = append(props, name)
		}
		var fields []string
		for f := range tt.typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields = append(fields, name)
		}
		slices.Sort(props)
		slices.Sort(fields)
		if !slices.Equal(fields, props) {
			t.Errorf("%s has the JSON fields %q, the schema %s the properties %q", tt.typ, fields, tt.schema, props)
		}
		required := slices.Sorted(slices.Values(schema.Required))
		if !slices.Equal(required, props) {
			t.Errorf("schema %s requires %q of %q, want all: %s has neither pointers nor omitempty", tt.schema, required, props, tt.typ)
		}
	}
}
