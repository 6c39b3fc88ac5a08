package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/testkit/seatqtest"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/runs/runstream"
)

// sseEvent is one event of a stream as a client parses it.
type sseEvent struct {
	id, event string
	data      runs.Event
}

// sseStream is an open stream, read event by event.
type sseStream struct {
	t    *testing.T
	res  *http.Response
	scan *bufio.Scanner
	// retry is the stream's retry: field, once read.
	retry string
}

// openEvents opens GET /v1/runs/{id}/events with token (the bundle's when
// ""), the Last-Event-ID header lastID (none when "") and query (appended
// as is), and returns the answer; for a 200, a reader of its events.
func openEvents(t *testing.T, w *world, id uuid.UUID, token, lastID, query string) (*http.Response, *sseStream) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, w.server.URL+"/v1/runs/"+id.String()+"/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token == "" {
		token = w.token
	}
	hr.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		hr.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		return res, nil
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q, want text/event-stream", ct)
	}
	return res, &sseStream{t: t, res: res, scan: bufio.NewScanner(res.Body)}
}

// next returns the stream's next event, skipping comments (heartbeats)
// and the retry: field, or io.EOF when the server ended the stream.
func (s *sseStream) next() (sseEvent, error) {
	s.t.Helper()
	var e sseEvent
	var data string
	for s.scan.Scan() {
		line := s.scan.Text()
		switch {
		case line == "":
			if data == "" {
				continue
			}
			if err := json.Unmarshal([]byte(data), &e.data); err != nil {
				return e, fmt.Errorf("event data %q: %w", data, err)
			}
			return e, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "retry: "):
			s.retry = strings.TrimPrefix(line, "retry: ")
		case strings.HasPrefix(line, "id: "):
			e.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			e.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		default:
			return e, fmt.Errorf("unexpected line %q", line)
		}
	}
	if err := s.scan.Err(); err != nil {
		return e, err
	}
	return e, io.EOF
}

// want reads the next event and fails unless it is seq's of status.
func (s *sseStream) want(seq int64, status string) sseEvent {
	s.t.Helper()
	e, err := s.next()
	if err != nil {
		s.t.Fatalf("waiting for event %d (%s): %v", seq, status, err)
	}
	wantType := runs.EventType(status)
	if e.id != fmt.Sprint(seq) || e.event != wantType || e.data.Seq != seq || e.data.Type != wantType ||
		e.data.Status != status || e.data.OccurredAt.IsZero() {
		s.t.Fatalf("event = id %q event %q data %+v, want seq %d %s", e.id, e.event, e.data, seq, wantType)
	}
	return e
}

// wantEnd fails unless the server ends the stream before another event.
func (s *sseStream) wantEnd() {
	s.t.Helper()
	if e, err := s.next(); !errors.Is(err, io.EOF) {
		s.t.Fatalf("after the last event: %+v, %v; want the stream to end", e, err)
	}
}

// streamsWith is a setupOpts whose server's streams are hub's config on
// its Runs, polling every 100ms; the hub is written to *hub.
func streamsWith(cfg runstream.Config, hub **runstream.Hub) setupOpts {
	return setupOpts{deps: func(d *api.Deps) {
		cfg.Poll = 100 * time.Millisecond
		h, err := runstream.New(cfg, d.Runs, d.Logger)
		if err != nil {
			panic(err)
		}
		d.Streams, *hub = h, h
	}}
}

// TestRunEventsResumeAndFollow: a stream sends exactly the events after
// Last-Event-ID (header or query parameter), then a report made while it
// is open, and ends after the terminal event; a client that has the last
// event of a finished Run is answered 204.
func TestRunEventsResumeAndFollow(t *testing.T) {
	t.Parallel()
	var hub *runstream.Hub
	w := newWorld(t, streamsWith(runstream.Config{}, &hub))
	report := func(body string) {
		t.Helper()
		res := w.do(req{method: http.MethodPut, path: "/v1/runs/" + w.runID.String() + "/status", body: body, token: w.runtime})
		if res.status != http.StatusOK {
			t.Fatalf("report %s = %d %s", body, res.status, res.body)
		}
	}
	report(`{"status":"running"}`)

	// From the start: the admission and running, then it waits.
	res, all := openEvents(t, w, w.runID, "", "", "")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET events = %d, want 200", res.StatusCode)
	}
	first := all.want(1, runs.StatusQueued)
	if first.data.RunID != w.runID || first.data.ResultRef != nil || first.data.Error != nil {
		t.Errorf("admission event = %+v, want Run %s without result or error", first.data, w.runID)
	}
	if all.retry != fmt.Sprint(runstream.Retry.Milliseconds()) {
		t.Errorf("retry: %q, want %d", all.retry, runstream.Retry.Milliseconds())
	}
	all.want(2, runs.StatusRunning)

	// Resumed after 1 (the header) and after 2 (the query parameter):
	// exactly the later events.
	_, fromOne := openEvents(t, w, w.runID, "", "1", "")
	fromOne.want(2, runs.StatusRunning)
	_, fromTwo := openEvents(t, w, w.runID, "", "", "?last_event_id=2")

	// A report while the three are open reaches each, and each ends.
	report(`{"status":"succeeded","result_ref":"s3://results/1"}`)
	for name, s := range map[string]*sseStream{"from 0": all, "from 1": fromOne, "from 2": fromTwo} {
		e := s.want(3, runs.StatusSucceeded)
		if e.data.ResultRef == nil || *e.data.ResultRef != "s3://results/1" {
			t.Errorf("%s: succeeded event %+v, want its result_ref", name, e.data)
		}
		s.wantEnd()
	}

	// The header wins over the query parameter; after the last event of
	// a finished Run there is nothing: 204, which stops an EventSource.
	if res, _ := openEvents(t, w, w.runID, "", "3", "?last_event_id=0"); res.StatusCode != http.StatusNoContent {
		t.Errorf("GET events after the terminal event = %d, want 204", res.StatusCode)
	}
	// A finished Run's whole history, from the start, and the end.
	_, again := openEvents(t, w, w.runID, "", "", "")
	again.want(1, runs.StatusQueued)
	again.want(2, runs.StatusRunning)
	again.want(3, runs.StatusSucceeded)
	again.wantEnd()
	waitStreams(t, hub, 0)
}

// waitStreams waits until hub has n streams open: a stream's slot goes
// back when its handler returns, just after the client read its end.
func waitStreams(t *testing.T, hub *runstream.Hub, n int) {
	t.Helper()
	// A bound on liveness, not a timing assertion: a slot is back within
	// milliseconds of its stream's end.
	for deadline := time.Now().Add(30 * time.Second); hub.Streams() != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams open after 30 s, want %d", hub.Streams(), n)
		}
	}
}

// TestRunEventsRefusals: another organization's Run and a path that is no
// UUID are 404; a Last-Event-ID that is no seq is 400 naming where it came
// from; a runtime credential is 403. None opens a stream.
func TestRunEventsRefusals(t *testing.T) {
	t.Parallel()
	var hub *runstream.Hub
	w := newWorld(t, streamsWith(runstream.Config{}, &hub))
	path := "/v1/runs/" + w.runID.String() + "/events"
	w.do(req{method: http.MethodGet, path: path, token: w.other}).wantProblem(t, http.StatusNotFound, api.CodeNotFound, "another org's Run")
	w.do(req{method: http.MethodGet, path: "/v1/runs/" + uuid.NewString() + "/events"}).wantProblem(t, http.StatusNotFound, api.CodeNotFound, "no Run")
	w.do(req{method: http.MethodGet, path: "/v1/runs/not-a-uuid/events"}).wantProblem(t, http.StatusNotFound, api.CodeNotFound, "a path id that is no UUID")
	w.do(req{method: http.MethodGet, path: path, token: w.runtime}).wantProblem(t, http.StatusForbidden, api.CodeInsufficientScope, "a runtime credential")
	for _, bad := range []string{"abc", "-1", "1.5", "1 2", "+1", "99999999999999999999", "0x10"} {
		res := w.do(req{method: http.MethodGet, path: path, header: map[string]string{"Last-Event-ID": bad}})
		p := res.problem(t)
		if res.status != http.StatusBadRequest || p.Code != api.CodeValidationFailed || len(p.Errors) != 1 || p.Errors[0].Field != "Last-Event-ID" {
			t.Errorf("Last-Event-ID %q = %d %s, want 400 validation_failed naming Last-Event-ID", bad, res.status, res.body)
		}
		res = w.do(req{method: http.MethodGet, path: path + "?last_event_id=" + url.QueryEscape(bad)})
		p = res.problem(t)
		if res.status != http.StatusBadRequest || p.Code != api.CodeValidationFailed || len(p.Errors) != 1 || p.Errors[0].Field != "last_event_id" {
			t.Errorf("last_event_id=%q = %d %s, want 400 validation_failed naming last_event_id", bad, res.status, res.body)
		}
	}
	if n := hub.Streams(); n != 0 {
		t.Errorf("%d streams open after refusals, want 0", n)
	}
}

// TestRunEventsCapAndShutdown: a server with its most streams open answers
// one more 503 too_many_streams with Retry-After, and opens it once one
// ends; an open stream holds no seat (a server of one seat
// serves other requests beside it); closing the hub (the shutdown) ends
// the open streams and refuses new ones.
func TestRunEventsCapAndShutdown(t *testing.T) {
	t.Parallel()
	var hub *runstream.Hub
	opts := streamsWith(runstream.Config{MaxStreams: 2}, &hub)
	streams := opts.deps
	opts.deps = func(d *api.Deps) {
		streams(d)
		d.Seats = seatqtest.New(t, seatq.Config{Seats: 1, MaxWait: 2 * time.Second})
	}
	w := newWorld(t, opts)
	res1, one := openEvents(t, w, w.runID, "", "1", "")
	res2, two := openEvents(t, w, w.directRun, "", "1", "")
	if one == nil || two == nil {
		t.Fatalf("two streams on a server of one seat = %d and %d, want 200 both: a stream must not keep its seat",
			res1.StatusCode, res2.StatusCode)
	}
	waitStreams(t, hub, 2)

	res := w.do(req{method: http.MethodGet, path: "/v1/runs/" + w.runID.String() + "/events"})
	res.wantProblem(t, http.StatusServiceUnavailable, api.CodeTooManyStreams, "a third stream")
	if res.header.Get("Retry-After") == "" {
		t.Error("503 too_many_streams without Retry-After")
	}
	// With both streams open, the one seat serves a read at once: had a
	// stream kept its seat, the read would wait its 2 s and answer 429.
	if res := w.do(req{method: http.MethodGet, path: "/v1/runs/" + w.runID.String()}); res.status != http.StatusOK {
		t.Errorf("GET Run beside two streams = %d %s, want 200", res.status, res.body)
	}

	// The first ends (its Run finishes): a new stream opens.
	if res := w.do(req{method: http.MethodPut, path: "/v1/runs/" + w.runID.String() + "/status",
		body: `{"status":"failed","error":{"code":"boom","message":"it broke"}}`, token: w.runtime}); res.status != http.StatusOK {
		t.Fatalf("report failed = %d %s", res.status, res.body)
	}
	e := one.want(2, runs.StatusFailed)
	if e.data.Error == nil || e.data.Error.Code != "boom" || e.data.Error.Message == nil || *e.data.Error.Message != "it broke" {
		t.Errorf("failed event %+v, want its error", e.data)
	}
	one.wantEnd()
	waitStreams(t, hub, 1)
	_, three := openEvents(t, w, w.runID, "", "", "")
	three.want(1, runs.StatusQueued)
	three.want(2, runs.StatusFailed)
	three.wantEnd()

	// Shutdown: the open stream ends, a new one is refused 503.
	hub.Close()
	two.wantEnd()
	w.do(req{method: http.MethodGet, path: "/v1/runs/" + w.directRun.String() + "/events"}).
		wantProblem(t, http.StatusServiceUnavailable, api.CodeUnavailable, "a stream after the hub closed")
	waitStreams(t, hub, 0)
}

// TestRunEventsEndAtMaxDuration: a stream ends at its longest duration,
// having set retry:, so the client reconnects.
func TestRunEventsEndAtMaxDuration(t *testing.T) {
	t.Parallel()
	var hub *runstream.Hub
	w := newWorld(t, streamsWith(runstream.Config{MaxDuration: 300 * time.Millisecond, Heartbeat: 50 * time.Millisecond}, &hub))
	_, s := openEvents(t, w, w.runID, "", "", "")
	s.want(1, runs.StatusQueued)
	s.wantEnd()
	if s.retry == "" {
		t.Error("a stream ended before its Run did without retry:")
	}
	waitStreams(t, hub, 0)
}

// TestRunEventsEndWhenTheClientGoes: a client that goes away ends its
// stream, and gives its slot back, long before the stream's longest
// duration.
func TestRunEventsEndWhenTheClientGoes(t *testing.T) {
	t.Parallel()
	var hub *runstream.Hub
	w := newWorld(t, streamsWith(runstream.Config{MaxDuration: time.Hour}, &hub))
	res, gone := openEvents(t, w, w.directRun, "", "", "")
	if gone == nil {
		t.Fatalf("GET events = %d, want 200", res.StatusCode)
	}
	gone.want(1, runs.StatusQueued)
	waitStreams(t, hub, 1)
	res.Body.Close()
	waitStreams(t, hub, 0)
}
