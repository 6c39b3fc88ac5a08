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

	"github.com/searchd/searchd/internal/fairq"
	"github.com/searchd/searchd/internal/heldanswer"
)

// admit is the middleware, after authenticate, that seats each /v1
// request in the process's admission queue (Deps.Admission, package
// fairq), charged to its organization, before its handler runs: its
// statements run only once it has its seats (one, or more for a long
// list or a long body: see requestWidth and fairq.BytesWidth), and it holds them
// until its answer is rendered. Free seats are taken at once, whoever
// asks; when the seats are taken the request waits its organization's
// turn. Refused a seat (its organization's queue full, or no seat within
// the longest wait), it answers 429 rate_limited with a Retry-After
// estimated from the observed service rate, having done nothing (but a
// wait out while the database does not answer is that outage's 503: see
// waitedOnTheDatabase); a request whose client goes away while it waits
// leaves the queue at once. The seat rides in the request's context, so a
// start that waits with Prefer: wait gives it up while it only waits
// (fairq.Idle).
//
// A seat is charged for work, and for what the work cost, not for waiting
// on the client (issue 36):
//   - the body is read whole before the request queues (readBody), within
//     Deps.BodyTimeout and charged to a budget of bytes, so a slow sender
//     holds no seat while it sends, and net/http, which watches the
//     connection only once the body is read, notices a client that goes
//     away while its request waits;
//   - the answer is held in memory (internal/heldanswer) and the seats go
//     back before it is written, within a write deadline: a client that
//     reads slowly, or pipelines requests and never reads, holds no seat;
//   - the bytes read and rendered are charged to the seat
//     (fairq.Seat.Charge, fairq.BytesWidth): an answer that cost more seats
//     than the request took is paid by the organization's next requests.
func (s *Server) admit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		n, charged, err := s.readBody(c)
		if err != nil {
			return err
		}
		defer s.requestBodies.give(charged)
		seat, err := s.acquire(r.Context(), fairq.Flow{Kind: fairq.KindOrganization, Name: principal(c).OrganizationID.String()},
			max(requestWidth(c), fairq.BytesWidth(n)))
		if err != nil {
			return err
		}
		c.SetRequest(r.WithContext(fairq.NewContext(r.Context(), seat)))
		res := c.Response()
		client := res.Writer
		held := heldanswer.New(client)
		res.Writer = held
		// Deferred, so a handler that panics gives its seats back too. An
		// error (or the panic) is answered by echo's error handler after
		// this returns: straight to the client, as a problem is small.
		defer func() {
			res.Writer = client
			// What the request cost, known now: its organization's next
			// requests pay what it cost beyond its seats.
			seat.Charge(fairq.BytesWidth(n + int64(held.Bytes())))
			seat.Release()
			if err := held.Send(client); err != nil {
				s.d.Logger.LogAttrs(r.Context(), slog.LevelDebug, "api: the client did not take its answer",
					slog.String("error", err.Error()))
			}
		}()
		return next(c)
	}
}

// untimedBody is the longest body declared (Content-Length) that is read
// without a deadline of its own: a start's options, a saved search's
// brief. It holds no seat while it comes, and at most this of the body
// budget until the server's read timeout (a minute).
const untimedBody = 16 << 10

// readBody reads the request's body whole, when it has one, before the
// request queues for a seat (see admit), and puts it back as the body the
// handler reads; it returns its length and the bytes charged for it to
// the request body budget, which the caller gives back when the request
// ends. A body declared over Deps.MaxBodyBytes is refused 413 unread, one
// found over it 413; a body the budget cannot take answers 503 unread
// (the connection is closed), as does one that did not arrive within
// Deps.BodyTimeout (a body of unknown length, or declared longer than
// untimedBody).
func (s *Server) readBody(c echo.Context) (n int64, charged int64, err error) {
	r := c.Request()
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return 0, 0, nil
	}
	if r.ContentLength > s.d.MaxBodyBytes {
		return 0, 0, tooLarge("request", s.d.MaxBodyBytes)
	}
	body, charged, err := s.requestBodies.read(c.Response(), r, s.d.MaxBodyBytes, untimedBody, s.d.BodyTimeout, nil)
	switch {
	case errors.Is(err, errBudgetSpent):
		c.Response().Header().Set(echo.HeaderConnection, "close")
		return 0, 0, unavailable("too many request bodies are being read or served; retry after Retry-After")
	case errors.Is(err, errBodyTooLarge):
		return 0, 0, tooLarge("request", s.d.MaxBodyBytes)
	case errors.Is(err, errBodyLate):
		return 0, 0, unavailable(fmt.Sprintf("the request body did not arrive within %s", s.d.BodyTimeout))
	case err != nil:
		return 0, 0, malformedJSON("the request body could not be read")
	}
	// Closing closes the original.
	r.Body = struct {
		io.Reader
		io.Closer
	}{bytes.NewReader(body), r.Body}
	return int64(len(body)), charged, nil
}

// listRowsPerSeat is how many rows of a list page one seat stands for: a
// list asking for more (?limit=, up to 200) takes a seat per this many,
// (4 for the largest page), so that pages of 200 rows, which take several
// times the processor and memory of a start, cannot all run at once
// beside a light organization's start.
const listRowsPerSeat = 50

// requestWidth is the seats a request takes: one, or for a list the
// seats its ?limit= stands for. A limit that is not a number takes one
// (the handler refuses it without reading anything).
func requestWidth(c echo.Context) int {
	if v := c.QueryParam("limit"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > listRowsPerSeat {
			// The largest list is 200 rows; a larger limit is refused.
			return min((n+listRowsPerSeat-1)/listRowsPerSeat, 200/listRowsPerSeat)
		}
	}
	return 1
}

// acquire takes width seats of the admission queue for a request of flow
// f, as fairq.Queue.Acquire does, and answers a refusal: 429
// rate_limited ([refusedProblem]), or the outage's 503 when the request
// waited out the database ([waitedOnTheDatabase]).
func (s *Server) acquire(ctx context.Context, f fairq.Flow, width int) (*fairq.Seat, error) {
	seat, err := s.d.Admission.Acquire(ctx, f, width)
	var r *fairq.Refusal
	switch {
	case !errors.As(err, &r):
		return seat, err
	case waitedOnTheDatabase(ctx, err, s.d.Ready):
		// Every seat waits on the database: the outage's answer.
		return nil, unavailable("the service cannot reach its database, and every seat of this server waits on it; retry later")
	}
	return nil, refusedProblem(r)
}

// waitedOnTheDatabase reports whether err is the admission queue's refusal
// of a request that waited its longest for a seat while ready, the
// readiness of the service, says the database does not answer. Every seat
// is then held by a request waiting on the database (a blackholed
// primary holds each up to SEARCHD_DB_ANSWER_TIMEOUT), and the wait was
// the outage's, not the organization's rate: the answer is the outage's
// 503 unavailable, not 429 (issue 24.11). ready is given a second: the
// binary's (readiness.Checker) answers at once from its last check, and
// a readiness that does not answer within it (readiness.Pool's ping,
// waiting for a connection of a pool whose every connection is held)
// says nothing, so the refusal stays a 429.
func waitedOnTheDatabase(ctx context.Context, err error, ready func(context.Context) error) bool {
	var r *fairq.Refusal
	if !errors.As(err, &r) || !errors.Is(r.Reason, fairq.ErrWaitTimeout) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return ready(ctx) != nil && ctx.Err() == nil
}

// refusedProblem is the 429 of a request the admission queue refused.
func refusedProblem(r *fairq.Refusal) *apiError {
	who := "your organization"
	if r.Flow.Kind == fairq.KindProvider {
		who = "this provider"
	}
	detail := fmt.Sprintf("every seat of this server is taken and %s already has %d requests waiting for one, "+
		"the most it queues for one flow; retry after the Retry-After delay", who, r.QueueLength)
	if r.Reason == fairq.ErrWaitTimeout {
		detail = fmt.Sprintf("every seat of this server stayed taken and the turn of %s did not come within %s, "+
			"the longest a request waits; retry after the Retry-After delay", who, r.MaxWait)
	}
	return &apiError{status: http.StatusTooManyRequests, code: CodeRateLimited, detail: detail, retryAfter: r.RetryAfter}
}
