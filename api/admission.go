package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/internal/fairq"
)

// admit is the middleware, after authenticate, that seats each /v1
// request in the process's admission queue (Deps.Admission, package
// fairq), charged to its organization, before anything else of it runs:
// its body is read and its statements run only once it has a seat, and it
// holds the seat until its answer is written. A free seat is taken at
// once, whoever asks; when every seat is taken the request waits its
// organization's turn. Refused a seat (its organization's queue full, or
// no seat within the longest wait), it answers 429 rate_limited with a
// Retry-After estimated from the observed service rate, having done
// nothing; a request whose client goes away while it waits leaves the
// queue at once. The seat rides in the request's context, so a start that
// waits with Prefer: wait gives it up while it only waits (fairq.Idle).
//
// A body of up to [preReadBytes] is read before the request queues: so a
// slow sender holds no seat while it sends, and net/http, which watches
// the connection only once the body is read, notices a client that goes
// away while its request waits. A larger body is read once the request
// has its seat.
func (s *Server) admit(next echo.HandlerFunc) echo.HandlerFunc {
	q := s.admission
	return func(c echo.Context) error {
		r := c.Request()
		preRead(r, s.maxBodyBytes)
		seat, err := q.Acquire(r.Context(), fairq.Flow{Kind: fairq.KindOrganization, Name: principal(c).OrganizationID.String()})
		if err != nil {
			return err
		}
		defer seat.Release()
		c.SetRequest(r.WithContext(fairq.NewContext(r.Context(), seat)))
		return next(c)
	}
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
// when that is less, and the rest is left to the handler.
func preRead(r *http.Request, limit int64) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || r.ContentLength > min(preReadBytes, limit) {
		return
	}
	most := min(preReadBytes, limit+1)
	orig := r.Body
	buf, err := io.ReadAll(io.LimitReader(orig, most))
	var rest io.Reader = orig
	switch {
	case err != nil:
		rest = errReader{err}
	case int64(len(buf)) < most:
		rest = http.NoBody // the whole body: the connection is watched now
	}
	r.Body = preReadBody{Reader: io.MultiReader(bytes.NewReader(buf), rest), Closer: orig}
}

// preReadBody is a body read ahead, closing as the original does.
type preReadBody struct {
	io.Reader
	io.Closer
}

// errReader returns err, as the body it replaces did.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

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
