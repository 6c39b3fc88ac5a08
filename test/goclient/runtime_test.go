package goclient_test

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/client"
)

// testRuntime is a runtime written with the client alone: it verifies each
// dispatch, takes each Run once (by webhook-id), answers 202, and reports
// the Run running then succeeded with its own credential.
func testRuntime(t *testing.T, bin string) {
	key := []byte("client-test-runtime-key-32-bytes")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	verifier, err := client.NewDispatchVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		seen  = map[string]int{}
		taken = make(chan *client.RunDispatch, 4)
	)
	rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d, err := verifier.Verify(r.Header, body)
		if err != nil {
			t.Errorf("a dispatch did not verify: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen[d.Data.Run.ID]++
		first := seen[d.Data.Run.ID] == 1
		mu.Unlock()
		if first {
			taken <- d
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer rt.Close()
	s := startSearchd(t, bin, "SEARCHD_RUNTIME_URL="+rt.URL, "SEARCHD_RUNTIME_SECRET="+secret)
	ss := createSavedSearch(t, s)
	user, _ := newClient(t, s.url(), s.token, client.RetryPolicy{})
	ctx := withinAMinute(t)
	started, err := user.StartSavedSearch(ctx, ss.ID, client.StartOptions{MaxResults: 5})
	if err != nil {
		t.Fatal(err)
	}
	var d *client.RunDispatch
	select {
	case d = <-taken:
	case <-ctx.Done():
		t.Fatal("the runtime got no dispatch")
	}
	if d.Data.Run.ID != started.Run.ID || d.Data.Snapshot == nil || d.Data.Snapshot.ID != started.Snapshot.ID ||
		d.Data.Snapshot.Brief.Query != "laptop" {
		t.Fatalf("dispatch = %+v, want the started Run with its snapshot", d)
	}
	tok, err := auth.SignRuntimeToken([]byte(testSecret), s.org, "client-runtime", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	runtime, _ := newClient(t, s.url(), tok, client.RetryPolicy{})
	run, err := runtime.ReportRunStatus(ctx, d.Data.Run.ID, client.StatusReport{Status: client.StatusRunning})
	if err != nil || run.Status != client.StatusRunning {
		t.Fatalf("report running = %+v, %v", run, err)
	}
	done := client.StatusReport{Status: client.StatusSucceeded, ResultRef: "s3://bucket/laptops.json"}
	run, err = runtime.ReportRunStatus(ctx, d.Data.Run.ID, done)
	if err != nil || run.Status != client.StatusSucceeded || run.ResultRef == nil {
		t.Fatalf("report succeeded = %+v, %v", run, err)
	}
	again, err := runtime.ReportRunStatus(ctx, d.Data.Run.ID, done)
	if err != nil || again.Version != run.Version || !again.UpdatedAt.Equal(run.UpdatedAt) {
		t.Errorf("the same report again = %+v, %v; want the Run unchanged at v%d", again, err, run.Version)
	}
	_, err = runtime.ReportRunStatus(ctx, d.Data.Run.ID, client.StatusReport{Status: client.StatusRunning})
	var apiErr *client.APIError
	if !errors.Is(err, client.ErrRunFinished) || !errors.As(err, &apiErr) || apiErr.CurrentStatus != client.StatusSucceeded {
		t.Errorf("running after the end = %v, want ErrRunFinished naming succeeded", err)
	}
	if _, err := user.ReportRunStatus(ctx, d.Data.Run.ID, done); !errors.Is(err, client.ErrInsufficientScope) {
		t.Errorf("a user token's report = %v, want ErrInsufficientScope", err)
	}
	if _, err := runtime.GetRun(ctx, d.Data.Run.ID); !errors.Is(err, client.ErrInsufficientScope) {
		t.Errorf("a runtime credential reading a Run = %v, want ErrInsufficientScope", err)
	}
	// The runtime handed the dispatch over before it answered 202, so the
	// reports may precede the dispatcher's record of that answer: wait
	// for it (a delivery leaves a Run's reported status alone).
	var got *client.RunDetail
	for {
		got, err = user.GetRun(ctx, d.Data.Run.ID)
		if err != nil || got.Dispatch == nil || got.Dispatch.State != "pending" || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || got.Status != client.StatusSucceeded || got.Dispatch == nil || got.Dispatch.State != "dispatched" ||
		got.Dispatch.Attempts < 1 {
		t.Errorf("GetRun = %+v (dispatch %+v), %v; want succeeded, dispatched", got, got.Dispatch, err)
	}
}

// testCancel: a Run the runtime took is cancelled through the client; the
// runtime, written with the client alone, verifies the cancel request
// (told apart from a dispatch by its webhook-id) and reports the Run
// cancelled. A repeat cancel answers the Run as it is; a finished Run's
// cancel is ErrRunFinished.
func testCancel(t *testing.T, bin string) {
	key := []byte("client-test-runtime-key-32-bytes")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	verifier, err := client.NewDispatchVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	var (
		taken   = make(chan *client.RunDispatch, 4)
		cancels = make(chan *client.RunCancel, 4)
	)
	rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if client.IsCancel(r.Header) {
			c, err := verifier.VerifyCancel(r.Header, body)
			if err != nil {
				t.Errorf("a cancel request did not verify: %v", err)
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			cancels <- c
			w.WriteHeader(http.StatusAccepted)
			return
		}
		d, err := verifier.Verify(r.Header, body)
		if err != nil {
			t.Errorf("a dispatch did not verify: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		taken <- d
		w.WriteHeader(http.StatusAccepted)
	}))
	defer rt.Close()
	s := startSearchd(t, bin, "SEARCHD_RUNTIME_URL="+rt.URL, "SEARCHD_RUNTIME_SECRET="+secret)
	user, _ := newClient(t, s.url(), s.token, client.RetryPolicy{})
	tok, err := auth.SignRuntimeToken([]byte(testSecret), s.org, "client-runtime", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	runtime, _ := newClient(t, s.url(), tok, client.RetryPolicy{})
	ctx := withinAMinute(t)
	started, err := user.StartRun(ctx, client.DirectStart{Kind: client.KindCapability, Name: "slow.capability", Input: map[string]any{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-taken:
	case <-ctx.Done():
		t.Fatal("the runtime got no dispatch")
	}
	got, err := user.CancelRun(ctx, started.Run.ID, client.CancelRequest{Reason: "not needed any more"})
	if err != nil || got.CancelRequestedAt == nil {
		t.Fatalf("CancelRun = %+v, %v; want the Run with its cancel requested", got, err)
	}
	var c *client.RunCancel
	select {
	case c = <-cancels:
	case <-ctx.Done():
		t.Fatal("the runtime got no cancel request")
	}
	if c.Data.Run.ID != started.Run.ID || c.Data.Reason == nil || *c.Data.Reason != "not needed any more" {
		t.Fatalf("cancel request = %+v, want Run %s's with the reason", c, started.Run.ID)
	}
	if _, err := runtime.ReportRunStatus(ctx, c.Data.Run.ID, client.StatusReport{Status: client.StatusCancelled}); err != nil {
		t.Fatalf("ReportRunStatus(cancelled) = %v", err)
	}
	again, err := user.CancelRun(ctx, started.Run.ID, client.CancelRequest{})
	if err != nil || again.Status != client.StatusCancelled {
		t.Errorf("repeated CancelRun = %+v, %v; want the Run cancelled", again, err)
	}
	// A Run that succeeded is not cancelled.
	done, err := user.StartRun(ctx, client.DirectStart{Kind: client.KindCapability, Name: "fast.capability", Input: map[string]any{"n": 2}})
	if err != nil {
		t.Fatal(err)
	}
	<-taken
	if _, err := runtime.ReportRunStatus(ctx, done.Run.ID, client.StatusReport{Status: client.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}
	if _, err := user.CancelRun(ctx, done.Run.ID, client.CancelRequest{}); !errors.Is(err, client.ErrRunFinished) {
		t.Errorf("CancelRun of a succeeded Run = %v, want ErrRunFinished", err)
	}
}
