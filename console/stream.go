package console

import (
	"cmp"
	"net/http"
	"strconv"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/runs/runstream"
)

// runEvents is GET /console/runs/{id}/events: the Run's events as
// Server-Sent Events for the session's organization, the stream of GET
// /v1/runs/{id}/events (package runstream) behind the session's cookie, so
// the Run page's script reads it with a plain EventSource (which sends the
// cookie, and Last-Event-ID when it reconnects). The page works without
// it: a reload shows the same.
//
// Like the API's stream, it takes a seat for its first read
// only (the session's gate streamer takes none), and answers 204 for a
// finished Run whose last event the browser has, so the EventSource stops
// reconnecting. A Last-Event-ID that is not a seq answers 400, another
// organization's Run 404, a full server 503 with Retry-After.
func (c *Console) runEvents(w http.ResponseWriter, r *http.Request) {
	// The header (an EventSource's reconnection) or, for the first
	// connection, which an EventSource cannot give a header, the
	// version the page shows.
	after, ok := runstream.ParseLastEventID(cmp.Or(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("last_event_id")))
	if !ok {
		c.fail(w, r, http.StatusBadRequest, "Bad Last-Event-ID", "Last-Event-ID must be the seq of an event: a whole number from 0.")
		return
	}
	release, err := c.d.Streams.Open()
	if err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(int(runstream.Retry.Seconds())))
		c.fail(w, r, http.StatusServiceUnavailable, "Too many streams", "This server has its most event streams open. Reload the page to see the Run as it is now.")
		return
	}
	defer release()
	org := orgOf(r)
	seat, err := c.d.Seats.Acquire(r.Context(), seatq.Flow{Kind: seatq.KindOrganization, Name: org.String()}, 1)
	if err != nil {
		c.seatRefused(w, r, err)
		return
	}
	st, err := c.d.Streams.Begin(r.Context(), org, pathID(r), after)
	seat.Release()
	switch {
	case errs.Is(err, errs.NotFound):
		c.notFound(w, r)
		return
	case err != nil:
		c.unavailable(w, r, err)
		return
	}
	if st.Done() {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	c.d.Streams.Serve(w, r, st)
}
