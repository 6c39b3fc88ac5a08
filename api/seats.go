package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/internal/heldanswer"
	"github.com/searchd/searchd/internal/seatq"
)

// admit is the middleware, after authentication, that seats each /v1
// request in the seat queue (Deps.Seats) under its organization before
// its handler runs, holding the seats (requestWidth) until the answer is
// rendered. A refusal answers 429 rate_limited with a Retry-After from the
// observed service rate, or 503 during a database outage
// (waitedOnTheDatabase). See docs/seat-queue.md.
//
// Seats pay for work, never for waiting on the client: the body is read
// before queueing (readBody), the answer is buffered (internal/heldanswer)
// and the seats released before it is written, and the bytes read and
// rendered are charged afterwards (seatq.Seat.Charge) to the
// organization's next requests.
func (s *Server) admit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		n, charged, err := s.readBody(c)
		if err != nil {
			return err
		}
		defer s.requestBodies.give(charged)
		seat, err := s.acquire(r.Context(), seatq.Flow{Kind: seatq.KindOrganization, Name: principal(c).OrganizationID.String()},
			max(requestWidth(c), seatq.BytesWidth(n)))
		if err != nil {
			return err
		}
		c.SetRequest(r.WithContext(seatq.NewContext(r.Context(), seat)))
		res := c.Response()
		client := res.Writer
		held := heldanswer.New(client)
		res.Writer = held
		// Deferred so a panicking handler releases its seats too; errors
		// are rendered after this returns, unbuffered.
		defer func() {
			res.Writer = client
			// Charge what it cost beyond its seats.
			seat.Charge(seatq.BytesWidth(n + int64(held.Bytes())))
			seat.Release()
			if err := held.Send(client); err != nil {
				s.d.Logger.LogAttrs(r.Context(), slog.LevelDebug, "api: the client did not take its answer",
					slog.String("error", err.Error()))
			}
		}()
		return next(c)
	}
}

// untimedBody is the longest declared body read without its own
// deadline; the server's read timeout still bounds it.
const untimedBody = 16 << 10

// readBody reads the whole body before queueing and puts it back for the
// handler. It returns the length and the budget charge, which the caller
// gives back when the request ends. It answers 413 over
// Deps.MaxBodyBytes, and 503 when the budget is spent or the body misses
// Deps.BodyTimeout.
func (s *Server) readBody(c echo.Context) (n int64, charged int64, err error) {
	r := c.Request()
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return 0, 0, nil
	}
	body, charged, err := s.requestBodies.read(c, s.d.MaxBodyBytes, untimedBody, s.d.BodyTimeout, nil)
	if err != nil {
		return 0, 0, err
	}
	// Closing closes the original.
	r.Body = struct {
		io.Reader
		io.Closer
	}{bytes.NewReader(body), r.Body}
	return int64(len(body)), charged, nil
}

// listRowsPerSeat is the list rows one seat stands for, so large pages
// take several seats.
const listRowsPerSeat = 50

// requestWidth is the seats a request takes: one, or for a list its
// ?limit= over listRowsPerSeat.
func requestWidth(c echo.Context) int {
	if v := c.QueryParam("limit"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > listRowsPerSeat {
			// The largest list is 200 rows; a larger limit is refused.
			return min((n+listRowsPerSeat-1)/listRowsPerSeat, 200/listRowsPerSeat)
		}
	}
	return 1
}

// acquire takes width seats for flow f, answering a refusal with 429
// ([refusedProblem]) or 503 ([waitedOnTheDatabase]).
func (s *Server) acquire(ctx context.Context, f seatq.Flow, width int) (*seatq.Seat, error) {
	seat, err := s.d.Seats.Acquire(ctx, f, width)
	var r *seatq.Refusal
	switch {
	case !errors.As(err, &r):
		return seat, err
	case waitedOnTheDatabase(ctx, err, s.d.Ready):
		// Every seat waits on the database: the outage's answer.
		return nil, unavailable("the service cannot reach its database, and every seat of this server waits on it; retry later")
	}
	return nil, refusedProblem(r)
}

// waitedOnTheDatabase reports whether err is a timed-out wait while
// ready says the database is down: the seats were held by requests stuck
// on the database, so the answer is 503, not 429. A ready that does not
// answer within a second proves nothing, and the refusal stays a 429.
func waitedOnTheDatabase(ctx context.Context, err error, ready func(context.Context) error) bool {
	var r *seatq.Refusal
	if !errors.As(err, &r) || !errors.Is(r.Reason, seatq.ErrWaitTimeout) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return ready(ctx) != nil && ctx.Err() == nil
}

// refusedProblem is the 429 of a refused seat.
func refusedProblem(r *seatq.Refusal) *apiError {
	who := "your organization"
	if r.Flow.Kind == seatq.KindProvider {
		who = "this provider"
	}
	detail := fmt.Sprintf("every seat of this server is taken and %s already has %d requests waiting for one, "+
		"the most it queues for one flow; retry after the Retry-After delay", who, r.QueueLength)
	if r.Reason == seatq.ErrWaitTimeout {
		detail = fmt.Sprintf("every seat of this server stayed taken and the turn of %s did not come within %s, "+
			"the longest a request waits; retry after the Retry-After delay", who, r.MaxWait)
	}
	return &apiError{status: http.StatusTooManyRequests, code: CodeRateLimited, detail: detail, retryAfter: r.RetryAfter}
}
