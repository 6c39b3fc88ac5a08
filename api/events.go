package api

import (
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/runs/runstream"
)

// lastEventIDParam is the query parameter that stands for the
// Last-Event-ID header, for a client that cannot set headers.
const lastEventIDParam = "last_event_id"

// streamRunEvents serves GET /v1/runs/{id}/events as Server-Sent Events
// (package runstream), from after Last-Event-ID (or ?last_event_id=).
// It answers 400 for a bad Last-Event-ID, 413 for a body, 404 for another
// organization's Run, 503 too_many_streams, 429 for the first read's seat,
// and 204 when the Run finished and the client has its last event.
//
// It is not behind admit, which would hold the never-ending answer; the
// stream holds a seat for its first read only.
func (s *Server) streamRunEvents(c echo.Context, id uuid.UUID) error {
	r := c.Request()
	v, field := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if v == "" {
		v, field = c.QueryParam(lastEventIDParam), lastEventIDParam
	}
	after, ok := runstream.ParseLastEventID(v)
	if !ok {
		return validationFailed(FieldError{Field: field, Message: "must be the seq of an event: a whole number from 0"})
	}
	release, err := s.d.Streams.Open()
	switch {
	case errors.Is(err, runstream.ErrClosed):
		return unavailable("the server is shutting down; reconnect with Last-Event-ID")
	case err != nil:
		return &apiError{status: http.StatusServiceUnavailable, code: CodeTooManyStreams, retryAfter: runstream.Retry,
			detail: "this server has its most event streams open; retry after Retry-After, or poll GET /v1/runs/{id}"}
	}
	defer release()
	org := principal(c).OrganizationID
	seat, err := s.acquire(r.Context(), seatq.Flow{Kind: seatq.KindOrganization, Name: org.String()}, 1)
	if err != nil {
		return err
	}
	st, err := s.d.Streams.Begin(r.Context(), org, id, after)
	seat.Release()
	if err != nil {
		return err
	}
	if st.Done() {
		return c.NoContent(http.StatusNoContent)
	}
	if r.Method == http.MethodHead {
		// HEAD: the status and type, at once.
		c.Response().Header().Set(echo.HeaderContentType, "text/event-stream")
		return c.NoContent(http.StatusOK)
	}
	s.d.Streams.Serve(c.Response(), r, st)
	return nil
}
