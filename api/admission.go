package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/internal/fairq"
)

// admit is the middleware, after authenticate, that seats each /v1
// request in the process's admission queue (Deps.Admission, package
// fairq), charged to its organization, before its handler runs: its
// statements run only once it has its seats (one, or more for a long
// list: see requestWidth), and it holds them until its answer is
// written. Free seats are taken at once, whoever asks; when the seats are
// taken the request waits its organization's turn. Refused a seat (its organization's queue full, or
// no seat within the longest wait), it answers 429 rate_limited with a
// Retry-After estimated from the observed service rate, having done
// nothing (but a wait out while the database does not answer is that
// outage's 503: see waitedOnTheDatabase); a request whose client goes away while it waits leaves the
// queue at once. The seat rides in the request's context, so a start that
// waits with Prefer: wait gives it up while it only waits (fairq.Idle).
//
// A body of up to [preReadBytes] is read before the request queues: so a
// slow sender holds no seat while it sends, and net/http, which watches
// the connection only once the body is read, notices a client that goes
// away while its request waits. A larger body is read once the request
// has its seat.
func (s *Server) admit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		rest := preRead(r, s.d.MaxBodyBytes)
		seat, err := s.acquire(r.Context(), fairq.Flow{Kind: fairq.KindOrganization, Name: principal(c).OrganizationID.String()},
			max(requestWidth(c), bodyWidth(r.ContentLength, rest)))
		if err != nil {
			return err
		}
		defer seat.Release()
		c.SetRequest(r.WithContext(fairq.NewContext(r.Context(), seat)))
		return next(c)
	}
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

// bodyBytesPerSeat is how many bytes of request body one seat stands
// for: a body is held whole in memory while it is decoded (several times
// over, in the buffer, the decoded value and its copies), so a body
// longer than this takes a seat per this many bytes, at most
// fairq.MaxWidth (a body at the default 4 MiB limit, half the default
// seats), and the bodies held at once stay a few times the body limit,
// not the seats times it.
const bodyBytesPerSeat = 512 << 10

// bodyWidth is the seats a request body stands for: its declared length's
// (length -1 when unknown), or when a body of unknown length was not read
// whole ahead (rest), the most, since it may be as long as the limit.
func bodyWidth(length int64, rest bool) int {
	switch {
	case length > bodyBytesPerSeat:
		return int(min((length+bodyBytesPerSeat-1)/bodyBytesPerSeat, fairq.MaxWidth))
	case length < 0 && rest:
		return fairq.MaxWidth
	}
	return 1
}

// preReadBytes bounds the body [Server.admit] reads before a request
// queues, so the bodies held by waiting requests stay small: at most this
// times the queue length per organization.
const preReadBytes = 16 << 10

// preRead reads r's body, when it has one of at most preReadBytes, into
// memory and puts it back as r.Body, so that the handler reads the same
// bytes (or the same error) later. A body declared longer, or over
// limit (the body limit, which the handler enforces), is left unread; one
// of unknown length is read up to preReadBytes, or one byte past limit
// when that is less, and the rest is left to the handler. It reads until
// the body says it has ended, as net/http watches the connection only
// from then. It reports whether some of the body is left unread.
func preRead(r *http.Request, limit int64) (rest bool) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return false
	}
	if r.ContentLength > min(preReadBytes, limit) {
		return true
	}
	var buf []byte
	var left io.Reader // what is left of the body after buf: nil when nothing is
	var err error
	if n := r.ContentLength; n > 0 {
		// One byte of room more than declared: the read that finds the
		// end, in the one allocation.
		buf = make([]byte, n+1)
		var got int
		got, err = io.ReadFull(r.Body, buf)
		buf = buf[:got]
		if err == io.ErrUnexpectedEOF {
			err = nil // the whole body, and its end seen
		} else if err == nil {
			left = r.Body // longer than declared: net/http refuses it
		}
	} else {
		most := min(preReadBytes, limit+1)
		buf, err = io.ReadAll(io.LimitReader(r.Body, most))
		if err == nil && int64(len(buf)) == most {
			left = r.Body // perhaps more: the handler reads it
		}
	}
	if err != nil {
		left = errReader{err}
	}
	read := io.Reader(bytes.NewReader(buf))
	if left != nil {
		read = io.MultiReader(read, left)
	}
	// Closing closes the original.
	r.Body = struct {
		io.Reader
		io.Closer
	}{read, r.Body}
	return left != nil
}

// errReader returns err, as the body it replaces did.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

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
