package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/internal/fairq"
	"github.com/searchd/searchd/runs/runstream"
)

// lastEventIDParam is the query parameter that stands for the
// Last-Event-ID header, for a client that cannot set headers.
const lastEventIDParam = "last_event_id"

// streamRunEvents is GET /v1/runs/{id}/events: the Run's events as
// Server-Sent Events (package runstream), for a page that watches one Run.
// It sends every event with a seq after the Last-Event-ID header (or the
// last_event_id query parameter; neither is from the start), then each
// new one as it happens, and ends after the terminal event, or at the
// stream's longest duration, or when the server shuts down (the client
// reconnects with Last-Event-ID and misses nothing).
//
// HEAD answers the status and type a GET would, at once.
//
// Errors: 400 validation_failed for a Last-Event-ID that is not a decimal
// seq; 413 payload_too_large for a request with a body; 404 not_found for a Run not in the caller's organization; 503
// too_many_streams (Retry-After) when this server has its most streams
// open; and the admission queue's 429 for the first read. A Run that
// finished, whose last event the client has, answers 204 No Content,
// which tells an EventSource to stop reconnecting.
//
// The route is not behind admit: that middleware holds the answer until
// the seats go back, and a stream's answer never ends while the Run runs.
// The stream takes a seat for its first read only, and gives it back
// before it waits: a waiting stream costs one primary-key lookup per
// poll, bounded by the streams' cap, not a seat for its whole life.
func (s *Server) streamRunEvents(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
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
	if err != nil {
		return streamsRefused(err)
	}
	defer release()
	org := principal(c).OrganizationID
	seat, err := s.acquire(r.Context(), fairq.Flow{Kind: fairq.KindOrganization, Name: org.String()}, 1)
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
		// The stream's status and type, without waiting for its events.
		c.Response().Header().Set(echo.HeaderContentType, "text/event-stream")
		return c.NoContent(http.StatusOK)
	}
	s.d.Streams.Serve(c.Response(), r, st)
	return nil
}

// streamsRefused is the 503 of a stream the hub would not open.
func streamsRefused(err error) error {
	if errors.Is(err, runstream.ErrClosed) {
		return unavailable("the server is shutting down; reconnect with Last-Event-ID")
	}
	return &apiError{status: http.StatusServiceUnavailable, code: CodeTooManyStreams, retryAfter: runstream.Retry,
		detail: fmt.Sprintf("this server has its most event streams open; retry after Retry-After, " +
			"or poll GET /v1/runs/{id}")}
}
