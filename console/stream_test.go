package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/runs/runstream"
)

// TestTheRunPageStream: the session's organization reads a Run's events
// from its Run page's stream, resumed after Last-Event-ID; a finished Run
// whose last event the page has answers 204; another organization's Run
// is 404 and a bad Last-Event-ID 400. Only an unfinished Run's page
// follows its stream.
func TestTheRunPageStream(t *testing.T) {
	t.Parallel()
	b := setupAt(t, 0, nil, func(d *console.Deps) {
		h, err := runstream.New(runstream.Config{Poll: 100 * time.Millisecond, MaxDuration: time.Second}, d.Runs, nil)
		if err != nil {
			t.Fatal(err)
		}
		d.Streams = h
	})
	w := b.world
	tok := b.signIn(t, w.OrgA, "alice")
	path := "/console/runs/" + w.SecondRun.String() + "/events"

	rec := b.do("GET", path, tok, nil, map[string]string{"Last-Event-ID": "2"})
	body := rec.Body.String()
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" ||
		strings.Contains(body, "id: 2\n") || !strings.Contains(body, "id: 3\n") || !strings.Contains(body, "event: run.succeeded\n") {
		t.Errorf("GET %s after 2 = %d %q:\n%s, want the events after 2 to the end", path, rec.Code, rec.Header().Get("Content-Type"), body)
	}
	last := body[strings.LastIndex(body, "id: ")+4:]
	last = last[:strings.Index(last, "\n")]
	if rec := b.do("GET", path, tok, nil, map[string]string{"Last-Event-ID": last}); rec.Code != http.StatusNoContent {
		t.Errorf("GET %s after the last event (%s) = %d, want 204", path, last, rec.Code)
	}
	if rec := b.do("GET", path+"?last_event_id=x", tok, nil, nil); rec.Code != http.StatusBadRequest {
		t.Errorf("GET %s with a bad last_event_id = %d, want 400", path, rec.Code)
	}
	if rec := b.do("GET", path, b.signIn(t, w.OrgB, "eve"), nil, nil); rec.Code != http.StatusNotFound {
		t.Errorf("another organization's GET %s = %d, want 404", path, rec.Code)
	}
	// The finished Run's page follows nothing; the queued one's does, from
	// the version it shows.
	if page := b.do("GET", "/console/runs/"+w.SecondRun.String(), tok, nil, nil).Body.String(); strings.Contains(page, "data-events") {
		t.Error("a finished Run's page follows its stream")
	}
	page := b.do("GET", "/console/runs/"+w.DirectRun.String(), tok, nil, nil).Body.String()
	if !strings.Contains(page, `data-events="/console/runs/`+w.DirectRun.String()+`/events" data-version="1"`) {
		t.Errorf("a queued Run's page does not follow its stream from version 1:\n%s", page[:min(len(page), 2000)])
	}
}
