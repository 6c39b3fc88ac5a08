package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dispatch"
)

// TestCredentialsOpenOnlyTheirRoutes: a runtime credential is refused on
// every user route, and a user (or operator) token on the runtime's, with
// 403 insufficient_scope and its challenge, writing nothing; a runtime
// token that names no runtime (no sub) is no credential at all.
func TestCredentialsOpenOnlyTheirRoutes(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	fp := fingerprintQuery(w.agentTables(t))
	wantScope := func(name string, rq req) {
		t.Helper()
		before, err := w.fingerprint(fp)
		if err != nil {
			t.Fatal(err)
		}
		res := w.do(rq)
		if res.status != http.StatusForbidden || res.problem(t).Code != api.CodeInsufficientScope ||
			!strings.Contains(res.header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
			t.Errorf("%s: %d %s (WWW-Authenticate %q), want 403 insufficient_scope", name, res.status, res.body,
				res.header.Get("WWW-Authenticate"))
		}
		if after, err := w.fingerprint(fp); err != nil || after != before {
			t.Errorf("%s wrote rows: %s, want %s (%v)", name, after, before, err)
		}
	}
	sawRuntimeRoute := false
	for _, r := range w.bearerRoutes(t) {
		rq := w.validRequest(r)
		if r.String() == runtimeRoute {
			sawRuntimeRoute = true
			rq.token = w.token
			wantScope("a user token on "+r.String(), rq)
			op, err := auth.SignOperatorToken(testSecret, w.org, "olga", time.Now(), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			rq.token = op
			wantScope("an operator token on "+r.String(), rq)
			noSub, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{OrgID: w.org.String(), Role: auth.RoleRuntime,
				RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}}).SignedString(testSecret)
			if err != nil {
				t.Fatal(err)
			}
			rq.token = noSub
			wantUnauthorized(t, "a runtime token without a sub", w.do(rq))
			continue
		}
		rq.token = w.runtime
		wantScope("a runtime credential on "+r.String(), rq)
	}
	if !sawRuntimeRoute {
		t.Fatalf("the router has no %s", runtimeRoute)
	}
	if _, err := auth.SignRuntimeToken(testSecret, uuid.Nil, "rt", time.Now(), time.Hour); err == nil {
		t.Error("SignRuntimeToken without an organization succeeded")
	}
	if _, err := auth.SignRuntimeToken(testSecret, w.org, "", time.Now(), time.Hour); err == nil {
		t.Error("SignRuntimeToken without a sub succeeded")
	}
}

// runStatus is what a test reads of a Run answer.
type runStatus struct {
	Status    string  `json:"status"`
	Version   int64   `json:"version"`
	UpdatedAt string  `json:"updated_at"`
	ResultRef *string `json:"result_ref"`
	Error     *struct {
		Code    string  `json:"code"`
		Message *string `json:"message"`
	} `json:"error"`
	Dispatch *struct {
		State          string  `json:"state"`
		Attempts       int     `json:"attempts"`
		NextAttemptAt  *string `json:"next_attempt_at"`
		LastStatusCode *int    `json:"last_status_code"`
		LastError      *string `json:"last_error"`
	} `json:"dispatch"`
}

// TestStatusReports drives the runtime's route: concurrent duplicates,
// a forward jump, out-of-order and post-terminal reports, another
// organization's runtime; each answer and the stored version checked.
func TestStatusReports(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	path := "/v1/runs/" + w.runID.String() + "/status"
	report := func(token, body string) *response {
		return w.do(req{method: http.MethodPut, path: path, body: body, token: token})
	}
	stored := func() runStatus {
		t.Helper()
		var got runStatus
		w.do(req{method: http.MethodGet, path: "/v1/runs/" + w.runID.String()}).decode(t, &got)
		return got
	}
	if got := stored(); got.Status != "queued" || got.Version != 1 || got.Dispatch == nil ||
		got.Dispatch.State != dispatch.StatePending || got.Dispatch.Attempts != 0 || got.Dispatch.NextAttemptAt == nil {
		t.Fatalf("a new Run = %+v, want queued v1 with a pending dispatch and no attempt", got)
	}

	// 20 duplicate reports at once: one change, every answer at version 2.
	var wg sync.WaitGroup
	answers := make([]runStatus, 20)
	codes := make([]int, 20)
	for i := range answers {
		wg.Go(func() {
			res, err := w.send(req{method: http.MethodPut, path: path, body: `{"status":"running"}`, token: w.runtime})
			if err != nil {
				t.Error(err)
				return
			}
			codes[i] = res.status
			_ = json.Unmarshal(res.body, &answers[i])
		})
	}
	wg.Wait()
	for i, a := range answers {
		if codes[i] != http.StatusOK || a.Status != "running" || a.Version != 2 || a.UpdatedAt != answers[0].UpdatedAt {
			t.Errorf("duplicate report %d = %d %+v, want 200 running v2 at one updated_at", i, codes[i], a)
		}
	}
	if got := stored(); got.Status != "running" || got.Version != 2 {
		t.Errorf("after 20 duplicates: %+v, want running v2", got)
	}

	// Another organization's runtime names A's Run: 404, nothing changes.
	if res := report(w.otherRuntime, `{"status":"failed","error":{"code":"x"}}`); res.status != http.StatusNotFound {
		t.Errorf("B's runtime on A's Run = %d %s, want 404", res.status, res.body)
	}
	// Refused bodies: 400 naming the field, nothing changes.
	for body, field := range map[string]string{
		`{"status":"dispatched"}`:                                                        "status",
		`{"status":"done"}`:                                                              "status",
		`{"status":"failed","result_ref":"s3://x"}`:                                      "result_ref",
		`{"status":"succeeded","result_ref":""}`:                                         "result_ref",
		`{"status":"succeeded","error":{"code":"x"}}`:                                    "error",
		`{"status":"failed","error":{"code":"Not A Code"}}`:                              "error.code",
		`{"status":"running","extra":1}`:                                                 "extra",
		fmt.Sprintf(`{"status":"succeeded","result_ref":%q}`, strings.Repeat("r", 2049)): "result_ref",
	} {
		res := report(w.runtime, body)
		p := res.problem(t)
		if res.status != http.StatusBadRequest || p.Code != api.CodeValidationFailed || len(p.Errors) == 0 || p.Errors[0].Field != field {
			t.Errorf("report %s = %d %s, want 400 validation_failed naming %s", body, res.status, res.body, field)
		}
	}
	if got := stored(); got.Status != "running" || got.Version != 2 {
		t.Errorf("after refused reports: %+v, want running v2", got)
	}

	// The end, twice: the repeat changes nothing, updated_at included.
	first := report(w.runtime, `{"status":"succeeded","result_ref":"s3://results/1"}`)
	var one, two runStatus
	first.decode(t, &one)
	time.Sleep(10 * time.Millisecond)
	report(w.runtime, `{"status":"succeeded","result_ref":"s3://results/1"}`).decode(t, &two)
	if first.status != http.StatusOK || one.Status != "succeeded" || one.Version != 3 || one.ResultRef == nil ||
		two.Version != 3 || two.UpdatedAt != one.UpdatedAt {
		t.Errorf("succeeded then again = %+v then %+v, want v3 both, one updated_at", one, two)
	}
	// Out of order, or another end: 409 run_finished, with how it ended.
	for _, body := range []string{`{"status":"running"}`, `{"status":"failed","error":{"code":"late"}}`,
		`{"status":"succeeded","result_ref":"s3://results/2"}`, `{"status":"cancelled"}`} {
		res := report(w.runtime, body)
		p := res.problem(t)
		if res.status != http.StatusConflict || p.Code != api.CodeRunFinished || p.CurrentStatus != "succeeded" ||
			p.CurrentVersion == nil || *p.CurrentVersion != 3 {
			t.Errorf("report %s after succeeded = %d %s, want 409 run_finished naming succeeded v3", body, res.status, res.body)
		}
	}
	if got := stored(); got.Status != "succeeded" || got.Version != 3 || got.ResultRef == nil || *got.ResultRef != "s3://results/1" {
		t.Errorf("after late reports: %+v, want succeeded v3 with the first result", got)
	}
}

// TestGetRunShowsTheDispatch: GET /v1/runs/{id} carries the dispatch's
// state, attempts and last answer as the outbox holds them.
func TestGetRunShowsTheDispatch(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	store := dispatch.NewStore(w.pool, nil)
	for {
		leased, err := store.LeasePass(t.Context(), 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(leased) == 0 {
			break
		}
		for _, l := range leased {
			if _, err := store.End(t.Context(), dispatch.End{Leased: dispatch.Leased{OrganizationID: l.OrganizationID, RunID: l.RunID,
				Attempt: l.Attempt}, Outcome: dispatch.OutcomeFailed, StatusCode: 422, Answer: "422 unknown kind"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var got runStatus
	w.do(req{method: http.MethodGet, path: "/v1/runs/" + w.runID.String()}).decode(t, &got)
	if got.Dispatch == nil || got.Dispatch.State != dispatch.StateFailed || got.Dispatch.Attempts != 1 ||
		got.Dispatch.LastStatusCode == nil || *got.Dispatch.LastStatusCode != 422 || got.Dispatch.LastError == nil ||
		*got.Dispatch.LastError != "422 unknown kind" || got.Dispatch.NextAttemptAt != nil || got.Status != "queued" {
		t.Errorf("GET Run = %+v, want a failed dispatch after 1 attempt with the 422 recorded, the Run still queued", got)
	}
}
