package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
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
			r.body != `{"provider":"acme","provider_job_id":"acme-1","run_id":"8c0b9a8e-7b2c-4d0f-9d38-3f6d2f1f2a11"}` {
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
