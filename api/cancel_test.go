package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/dispatch"
)

// cancelled is what a test reads of a cancel's answer.
type cancelled struct {
	runStatus
	CancelRequestedAt *string `json:"cancel_requested_at"`
}

// TestCancelRun drives POST /v1/runs/{id}/cancel: a queued Run cancelled
// at once (its dispatch stopped), a Run the runtime has left to the
// runtime with its request recorded until the runtime reports, repeats
// that change nothing, a finished Run's 409, another organization's 404,
// and bodies refused with 400.
func TestCancelRun(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	cancel := func(id, token, body string) *response {
		return w.do(req{method: http.MethodPost, path: "/v1/runs/" + id + "/cancel", body: body, token: token})
	}
	read := func(res *response) cancelled {
		t.Helper()
		var got cancelled
		if res.status != http.StatusOK {
			t.Fatalf("cancel = %d %s, want 200", res.status, res.body)
		}
		res.decode(t, &got)
		return got
	}
	direct := w.directRun.String()

	// Another organization's Run is not found, and nothing changes.
	if res := cancel(direct, w.other, ""); res.status != http.StatusNotFound {
		t.Errorf("cancel of another organization's Run = %d %s, want 404", res.status, res.body)
	}
	// Bodies that are not a cancel's.
	for _, body := range []string{`{"reason":5}`, `{"why":"x"}`, `not json`,
		`{"reason":"` + strings.Repeat("é", 501) + `"}`} {
		res := cancel(direct, w.token, body)
		if res.status != http.StatusBadRequest {
			t.Errorf("cancel with body %.40q = %d %s, want 400", body, res.status, res.body)
			continue
		}
		res.problem(t)
	}
	if got := read(w.do(req{method: http.MethodGet, path: "/v1/runs/" + direct})); got.Status != "queued" {
		t.Fatalf("after refused cancels the Run is %s, want queued", got.Status)
	}

	// Queued: cancelled at once, its dispatch stopped; a repeat (without a
	// body) changes nothing.
	got := read(cancel(direct, w.token, `{"reason":"wrong input"}`))
	if got.Status != "cancelled" || got.Version != 2 || got.CancelRequestedAt == nil {
		t.Errorf("cancel of a queued Run = %+v, want cancelled at version 2", got)
	}
	again := read(cancel(direct, w.token, ""))
	if again.Version != 2 || again.UpdatedAt != got.UpdatedAt || *again.CancelRequestedAt != *got.CancelRequestedAt {
		t.Errorf("repeated cancel = %+v, want the Run as the first left it", again)
	}
	var detail cancelled
	w.do(req{method: http.MethodGet, path: "/v1/runs/" + direct}).decode(t, &detail)
	if detail.Dispatch == nil || detail.Dispatch.State != dispatch.StateCancelled {
		t.Errorf("the cancelled Run's dispatch = %+v, want cancelled", detail.Dispatch)
	}

	// The runtime has it (it reported running): the request is recorded,
	// the Run stays running until the runtime reports cancelled.
	saved := w.runID.String()
	status := func(body string) *response {
		return w.do(req{method: http.MethodPut, path: "/v1/runs/" + saved + "/status", body: body, token: w.runtime})
	}
	if res := status(`{"status":"running"}`); res.status != http.StatusOK {
		t.Fatalf("report running = %d %s", res.status, res.body)
	}
	got = read(cancel(saved, w.token, `{}`))
	if got.Status != "running" || got.Version != 2 || got.CancelRequestedAt == nil {
		t.Errorf("cancel of a running Run = %+v, want running, version 2, its cancel requested", got)
	}
	if n := w.count(`SELECT count(*) FROM agent.run_cancels WHERE run_id = $1 AND state = 'pending' AND requested_by = 'tester'`, w.runID); n != 1 {
		t.Errorf("%d pending cancel requests to the runtime, want 1", n)
	}
	if again := read(cancel(saved, w.token, `{"reason":"again"}`)); again.Version != 2 || *again.CancelRequestedAt != *got.CancelRequestedAt {
		t.Errorf("repeated cancel = %+v, want the Run as the first left it", again)
	}
	if n := w.count(`SELECT count(*) FROM agent.run_cancels WHERE run_id = $1 AND reason IS NULL`, w.runID); n != 1 {
		t.Errorf("the repeat changed the cancel request (%d rows as the first wrote it, want 1)", n)
	}
	if res := status(`{"status":"cancelled"}`); res.status != http.StatusOK {
		t.Fatalf("report cancelled = %d %s", res.status, res.body)
	}
	if got := read(cancel(saved, w.token, "")); got.Status != "cancelled" || got.Version != 3 {
		t.Errorf("cancel after the runtime's report = %+v, want cancelled, version 3", got)
	}

	// A Run that succeeded: 409 run_finished, saying how it finished.
	var started struct {
		Run struct{ ID string } `json:"run"`
	}
	w.startDirect("to-finish", `{"kind":"definition","name":"finisher"}`).decode(t, &started)
	done := started.Run.ID
	if res := w.do(req{method: http.MethodPut, path: "/v1/runs/" + done + "/status", body: `{"status":"succeeded"}`, token: w.runtime}); res.status != http.StatusOK {
		t.Fatalf("report succeeded = %d %s", res.status, res.body)
	}
	res := cancel(done, w.token, "")
	if p := res.problem(t); res.status != http.StatusConflict || p.Code != api.CodeRunFinished ||
		p.CurrentStatus != "succeeded" {
		t.Errorf("cancel of a succeeded Run = %d %s, want 409 run_finished with current_status succeeded", res.status, res.body)
	}
}
