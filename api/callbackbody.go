package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// A callback's signature can only be checked once its whole body is in, so
// until then anyone holds the server's memory with a body: a forged
// signature of the right shape, a declared length at the callback limit,
// and the bytes sent slowly. Two bounds make that cheap to refuse. Every
// body awaiting its signature check is charged to one budget of bytes
// before it is buffered, and a body the budget cannot take is refused at
// once (503 unavailable, Retry-After) without being read; and a body must
// arrive within a short deadline of its own, so a slow sender gives its
// share back within seconds.
const (
	// DefaultCallbackBodyBudget is the default of Deps.CallbackBodyBudget:
	// 64 bodies of the default callback limit.
	DefaultCallbackBodyBudget = 64 << 20
	// DefaultCallbackBodyTimeout is the default of
	// Deps.CallbackBodyTimeout: a body of the default callback limit must
	// arrive at 100 KiB/s or faster.
	DefaultCallbackBodyTimeout = 10 * time.Second
	// smallCallbackBody is the largest body that may use the quarter of
	// the budget larger bodies leave: a provider's status updates are a
	// few KiB, so they still get in while full-size bodies hold the rest.
	smallCallbackBody = 64 << 10
	// firstUnknownBody is the buffer first charged for a body of unknown
	// length (chunked); it doubles, charged each time, up to the limit.
	firstUnknownBody = 4 << 10
)

// bodyBudget counts the bytes of capacity that callback bodies awaiting
// their signature hold together. It is safe for concurrent use.
type bodyBudget struct {
	mu    sync.Mutex
	used  int64
	total int64 // every body together
	large int64 // bodies over smallCallbackBody together: three quarters
}

func newBodyBudget(total int64) *bodyBudget {
	return &bodyBudget{total: total, large: total - total/4}
}

// take charges n more bytes to a body that then holds held bytes in all,
// and reports whether the budget had them: a body over smallCallbackBody
// may not take the last quarter of it.
func (b *bodyBudget) take(n, held int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := b.total
	if held > smallCallbackBody {
		limit = b.large
	}
	if b.used+n > limit {
		return false
	}
	b.used += n
	return true
}

// give returns n bytes a body had taken.
func (b *bodyBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// readCallbackBody reads the callback body of c (one byte over the
// callback limit is its 413), within the callback body timeout, into a
// buffer charged to the budget as it grows, writing each byte read to mac
// too. It returns the body and the bytes charged for it, which the caller
// gives back once the signature is checked; the charge is zero when err
// is not nil.
//
// It answers 503 unavailable with Retry-After when the budget cannot take
// the body (and closes the connection: the body is not read), and when the
// body did not arrive in time.
func (s *Server) readCallbackBody(c echo.Context, mac io.Writer) (body []byte, charged int64, err error) {
	r, limit := c.Request(), s.d.CallbackMaxBodyBytes
	defer func() {
		if err != nil {
			s.callbackBodies.give(charged)
			charged = 0
		}
	}()
	size := int64(firstUnknownBody)
	if r.ContentLength >= 0 {
		// Room for the declared body and the read that sees its end, so
		// an honest body is read into one allocation.
		size = r.ContentLength + 1
	}
	size = min(size, limit+1)
	if !s.callbackBodies.take(size, size) {
		return nil, 0, budgetSpent(c)
	}
	charged = size
	// A read deadline of this request alone: the server's own is for every
	// request, and far longer. (It is reset for the next request on the
	// connection.)
	_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(s.d.CallbackBodyTimeout))
	// MaxBytesReader asks the body for at most limit+1 bytes, and tells
	// net/http to close the connection after a body over it.
	src := http.MaxBytesReader(c.Response(), r.Body, limit)
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			// Only a body of unknown length gets here: a declared one ends
			// before its buffer is full.
			next := min(2*int64(cap(buf)), limit+1)
			if next <= int64(cap(buf)) {
				return nil, charged, tooLarge("callback", limit)
			}
			if !s.callbackBodies.take(next-int64(cap(buf)), next) {
				return nil, charged, budgetSpent(c)
			}
			charged = next
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, rerr := src.Read(buf[len(buf):cap(buf)])
		_, _ = mac.Write(buf[len(buf) : len(buf)+n])
		buf = buf[:len(buf)+n]
		var tooLong *http.MaxBytesError
		switch {
		case rerr == io.EOF:
			return buf, charged, nil
		case rerr == nil:
		case errors.As(rerr, &tooLong):
			return nil, charged, tooLarge("callback", limit)
		case errors.Is(rerr, os.ErrDeadlineExceeded):
			return nil, charged, unavailable(fmt.Sprintf("the callback body did not arrive within %s; redeliver after Retry-After",
				s.d.CallbackBodyTimeout))
		default:
			return nil, charged, malformedJSON("the request body could not be read")
		}
	}
}

// budgetSpent is the answer to a callback whose body the budget cannot
// take. The connection is closed after it, as the body is left unread.
func budgetSpent(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderConnection, "close")
	return unavailable("too many callback bodies are awaiting their signature check; redeliver after Retry-After")
}
