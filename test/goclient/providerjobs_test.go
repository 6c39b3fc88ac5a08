package goclient_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/client"
)

// startDirectRun starts a capability Run on c for provider jobs to belong
// to.
func startDirectRun(ctx context.Context, t *testing.T, c *client.Client, name string) *client.Run {
	t.Helper()
	res, err := c.StartRun(ctx, client.DirectStart{Kind: client.KindCapability, Name: name})
	if err != nil {
		t.Fatalf("StartRun(%s): %v", name, err)
	}
	return &res.Run
}

// jobsRegistered counts the organization's jobs of the provider with a
// provider job id, straight from the database.
func (s *searchd) jobsRegistered(provider, providerJobID string) int {
	return s.count(`SELECT count(*) FROM agent.provider_jobs
		WHERE organization_id = $1 AND provider = $2 AND provider_job_id = $3`, s.org, provider, providerJobID)
}

// callBack delivers a callback about a job to s as its provider does:
// signed with the provider's secret (Standard Webhooks), on the job's
// callback path. It returns the answer's status and "status" member.
func callBack(ctx context.Context, t *testing.T, s *searchd, job *client.ProviderJob, body string) (int, string) {
	t.Helper()
	id, ts := "delivery-"+uuid.NewString(), strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(testProviderSecret))
	mac.Write([]byte(id + "." + ts + "." + body))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url()+job.CallbackPath, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("callback: %v", err)
	}
	defer res.Body.Close()
	var answer struct {
		Status string `json:"status"`
	}
	if err := json.NewDecoder(res.Body).Decode(&answer); err != nil {
		t.Fatalf("callback answer %d: %v", res.StatusCode, err)
	}
	return res.StatusCode, answer.Status
}

// testProviderJobs registers, re-registers and reads provider jobs on a
// real searchd, and checks each refusal's sentinel and that none is
// retried.
func testProviderJobs(t *testing.T, bin string) {
	s := startSearchd(t, bin)
	c, rec := newClient(t, s.url(), s.token, client.RetryPolicy{})
	ctx := withinAMinute(t)
	run := startDirectRun(ctx, t, c, "render")
	other := startDirectRun(ctx, t, c, "render.other")
	params := client.RegisterProviderJobParams{RunID: run.ID, Provider: testProvider, ProviderJobID: "acme-job-1"}

	// A fresh registration: created, pending, with its callback path.
	before := time.Now().Add(-time.Minute)
	reg, err := c.RegisterProviderJob(ctx, params)
	if err != nil {
		t.Fatalf("RegisterProviderJob: %v", err)
	}
	job := reg.Job
	if _, err := uuid.Parse(job.ID); err != nil || job.ID == job.ProviderJobID {
		t.Errorf("RegisterProviderJob id = %q, want searchd's own UUID", job.ID)
	}
	if !reg.Created || reg.Attempts != 1 || job.OrganizationID != s.org.String() || job.RunID != run.ID ||
		job.Provider != testProvider || job.ProviderJobID != "acme-job-1" || job.Status != "pending" ||
		job.Result != nil || job.Version != 1 || job.CreatedAt.Before(before) || !job.UpdatedAt.Equal(job.CreatedAt) {
		t.Errorf("RegisterProviderJob = %+v, want a created pending job of version 1 of the Run in the token's organization", reg)
	}
	if want := "/v1/callbacks/" + testProvider + "/jobs/" + job.ID; job.CallbackPath != want {
		t.Errorf("CallbackPath = %q, want %q", job.CallbackPath, want)
	}

	// Again for the same Run: the same job, not created.
	again, err := c.RegisterProviderJob(ctx, params)
	if err != nil {
		t.Fatalf("RegisterProviderJob again: %v", err)
	}
	if again.Created || again.Attempts != 1 || !sameJob(again.Job, job) {
		t.Errorf("RegisterProviderJob again = %+v, want the job %+v, not created", again, job)
	}

	// For another Run: refused at once.
	var ae *client.APIError
	n := attemptsOf(rec, func() {
		_, err = c.RegisterProviderJob(ctx, client.RegisterProviderJobParams{RunID: other.ID, Provider: testProvider, ProviderJobID: "acme-job-1"})
	})
	if !errors.Is(err, client.ErrAlreadyRegistered) || !errors.As(err, &ae) || ae.Status != http.StatusConflict || n != 1 {
		t.Errorf("RegisterProviderJob for another Run: %v in %d attempts, want a 409 ErrAlreadyRegistered at once", err, n)
	}
	if got := s.jobsRegistered(testProvider, "acme-job-1"); got != 1 {
		t.Errorf("%d jobs registered as acme-job-1, want 1", got)
	}

	// Reads.
	got, err := c.GetProviderJob(ctx, job.ID)
	if err != nil || !sameJob(*got, job) {
		t.Errorf("GetProviderJob = %+v, %v; want %+v", got, err, job)
	}
	for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
		n = attemptsOf(rec, func() { _, err = c.GetProviderJob(ctx, id) })
		if !errors.Is(err, client.ErrNotFound) || n != 1 {
			t.Errorf("GetProviderJob(%q): %v in %d attempts, want ErrNotFound at once", id, err, n)
		}
	}

	// The callback path works as the provider's, and the result it
	// stores reads back with its numbers exact.
	status, answer := callBack(ctx, t, s, &job,
		`{"job_id":"acme-job-1","status":"succeeded","result":{"pages":12345678901234567890,"ratio":0.1,"parts":[{"n":3}]}}`)
	if status != http.StatusOK || answer != "accepted" {
		t.Fatalf("callback on %s answered %d %q, want 200 accepted", job.CallbackPath, status, answer)
	}
	done, err := c.GetProviderJob(ctx, job.ID)
	if err != nil {
		t.Fatalf("GetProviderJob after the callback: %v", err)
	}
	wantResult := map[string]any{
		"pages": json.Number("12345678901234567890"), // beyond float64
		"ratio": json.Number("0.1"),
		"parts": []any{map[string]any{"n": json.Number("3")}},
	}
	if done.Status != "succeeded" || done.Version != 2 || done.UpdatedAt.Before(done.CreatedAt) ||
		!reflect.DeepEqual(done.Result, wantResult) {
		t.Errorf("GetProviderJob after the callback = %+v, want succeeded at version 2 with the result's numbers exact", done)
	}
	// A repeated registration answers the job as it is now.
	now, err := c.RegisterProviderJob(ctx, params)
	if err != nil || now.Created || !sameJob(now.Job, *done) {
		t.Errorf("RegisterProviderJob after the callback = %+v, %v; want the succeeded job of version 2, not created", now, err)
	}

	// Refusals, none retried.
	tests := []struct {
		name  string
		p     client.RegisterProviderJobParams
		want  error
		field string // the refused field of a validation_failed
	}{
		{"run_id not a UUID", client.RegisterProviderJobParams{RunID: "not-a-uuid", Provider: testProvider, ProviderJobID: "j"},
			client.ErrValidation, "run_id"},
		{"no run_id", client.RegisterProviderJobParams{Provider: testProvider, ProviderJobID: "j"}, client.ErrValidation, "run_id"},
		{"provider without a secret", client.RegisterProviderJobParams{RunID: run.ID, Provider: "other", ProviderJobID: "j"},
			client.ErrValidation, "provider"},
		{"provider job id with a control character", client.RegisterProviderJobParams{RunID: run.ID, Provider: testProvider, ProviderJobID: "a\nb"},
			client.ErrValidation, "provider_job_id"},
		{"unknown Run", client.RegisterProviderJobParams{RunID: uuid.NewString(), Provider: testProvider, ProviderJobID: "j"},
			client.ErrNotFound, ""},
	}
	for _, tt := range tests {
		n := attemptsOf(rec, func() { _, err = c.RegisterProviderJob(ctx, tt.p) })
		if !errors.Is(err, tt.want) || n != 1 {
			t.Errorf("RegisterProviderJob(%s): %v in %d attempts, want %v at once", tt.name, err, n, tt.want)
			continue
		}
		if tt.field != "" && (!errors.As(err, &ae) || len(ae.Errors) != 1 || ae.Errors[0].Field != tt.field) {
			t.Errorf("RegisterProviderJob(%s): %v, want validation_failed naming %s alone", tt.name, err, tt.field)
		}
	}
	if got := s.count(`SELECT count(*) FROM agent.provider_jobs WHERE organization_id = $1`, s.org); got != 1 {
		t.Errorf("%d jobs in the organization, want the one registered", got)
	}

	stranger, strangerRec := newClient(t, s.url(), "not-a-jwt", client.RetryPolicy{})
	wantUnauthorizedAtOnce(t, strangerRec, "RegisterProviderJob", func() error { _, err := stranger.RegisterProviderJob(ctx, params); return err })
	wantUnauthorizedAtOnce(t, strangerRec, "GetProviderJob", func() error { _, err := stranger.GetProviderJob(ctx, job.ID); return err })
}

// testLostRegistration drops the 201 of a registration the server
// committed. The client retries, the server answers the job the lost
// attempt registered, and there is one job.
func testLostRegistration(t *testing.T, bin string) {
	s := startSearchd(t, bin)
	direct, _ := newClient(t, s.url(), s.token, client.RetryPolicy{})
	ctx := withinAMinute(t)
	run := startDirectRun(ctx, t, direct, "render")
	proxy := newDropProxy(t, s.addr)
	c, rec := newClient(t, proxy.url(), s.token, client.RetryPolicy{})

	proxy.armed.Store(true)
	reg, err := c.RegisterProviderJob(ctx, client.RegisterProviderJobParams{RunID: run.ID, Provider: testProvider, ProviderJobID: "lost-1"})
	if err != nil {
		t.Fatalf("RegisterProviderJob: %v (attempts %q)", err, rec.list())
	}
	select {
	case <-proxy.dropped:
	default:
		t.Fatal("the proxy dropped no answer")
	}
	// The first attempt's answer was lost after the commit, so the retry
	// found the job: not created by the final attempt, though this call
	// registered it.
	if reg.Created || reg.Attempts != 2 || !slices.Equal(rec.list(), []string{"error", "200"}) {
		t.Errorf("RegisterProviderJob = created %v in %d attempts %q; want the second attempt answered 200 after a lost answer",
			reg.Created, reg.Attempts, rec.list())
	}
	if reg.Job.RunID != run.ID || reg.Job.ProviderJobID != "lost-1" || reg.Job.Status != "pending" || reg.Job.Version != 1 {
		t.Errorf("RegisterProviderJob job = %+v, want the pending job lost-1 of the Run", reg.Job)
	}
	if n := s.jobsRegistered(testProvider, "lost-1"); n != 1 {
		t.Errorf("%d jobs registered as lost-1, want 1", n)
	}
	if n := s.count(`SELECT count(*) FROM agent.provider_jobs WHERE run_id = $1`, run.ID); n != 1 {
		t.Errorf("%d jobs of the Run, want 1", n)
	}
	got, err := direct.GetProviderJob(ctx, reg.Job.ID)
	if err != nil || !sameJob(*got, reg.Job) {
		t.Errorf("GetProviderJob = %+v, %v; want %+v", got, err, reg.Job)
	}
}

// sameJob reports whether a and b are the same job in the same state.
func sameJob(a, b client.ProviderJob) bool {
	return a.ID == b.ID && a.OrganizationID == b.OrganizationID && a.RunID == b.RunID &&
		a.Provider == b.Provider && a.ProviderJobID == b.ProviderJobID && a.Status == b.Status &&
		a.Version == b.Version && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) &&
		a.CallbackPath == b.CallbackPath && reflect.DeepEqual(a.Result, b.Result)
}
