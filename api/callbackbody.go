package api

import (
	"container/list"
	"context"
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
	// DefaultBodyBudget bounds the request bodies of the API read ahead
	// of their seats and held while served, together: four bodies of the
	// default limit (4 MiB), of which bodies over 64 KiB may hold three
	// quarters, so two of the limit at once (as many as their seats let
	// decode at once); at least two bodies of the limit set. The memory
	// test holds it: 64 MiB took serve to 308 MiB resident under 4 MiB
	// bodies from 64 connections.
	DefaultBodyBudget = 16 << 20
	// DefaultBodyTimeout is the default of Deps.BodyTimeout: a body of the
	// default limit must arrive at 140 KiB/s or faster.
	DefaultBodyTimeout = 30 * time.Second
)

// bodyBudget counts the bytes of capacity that bodies hold together:
// callback bodies awaiting their signature, or request bodies read ahead
// of their seats and held while served (each has its own). It is safe for
// concurrent use.
type bodyBudget struct {
	// wait is how long a body the budget cannot take waits for bytes to
	// be given back before it is refused; zero refuses it at once.
	wait  time.Duration
	mu    sync.Mutex
	used  int64
	total int64 // every body together
	large int64 // bodies over smallCallbackBody together: three quarters
	// waiting holds the bodies waiting for bytes (*budgetWaiter), first
	// come first: bytes given back go to the oldest while it fits.
	waiting list.List
}

// budgetWaiter is a body waiting for the budget; ready is closed once
// its bytes are taken for it.
type budgetWaiter struct {
	n, held int64
	ready   chan struct{}
}

func newBodyBudget(total int64, wait time.Duration) *bodyBudget {
	return &bodyBudget{total: total, large: total - total/4, wait: wait}
}

// fitsLocked reports whether n more bytes, for a body then holding held
// in all, are in the budget: a body over smallCallbackBody may not take
// the last quarter of it.
func (b *bodyBudget) fitsLocked(n, held int64) bool {
	limit := b.total
	if held > smallCallbackBody {
		limit = b.large
	}
	return b.used+n <= limit
}

// take charges n more bytes to a body that then holds held bytes in all,
// and reports whether the budget had them. It does not wait, and does not
// take bytes a waiting body is owed first (but a small body, whose
// quarter large ones never use, does not wait behind them).
func (b *bodyBudget) take(n, held int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fitsLocked(n, held) && (b.waiting.Len() == 0 || held <= smallCallbackBody) {
		b.used += n
		return true
	}
	return false
}

// takeWaiting is take, but a body the budget cannot take now waits its
// turn, first come first served, up to b.wait or until ctx ends; it
// reports whether the bytes were taken.
func (b *bodyBudget) takeWaiting(ctx context.Context, n, held int64) bool {
	b.mu.Lock()
	if b.fitsLocked(n, held) && (b.waiting.Len() == 0 || held <= smallCallbackBody) {
		b.used += n
		b.mu.Unlock()
		return true
	}
	if b.wait == 0 {
		b.mu.Unlock()
		return false
	}
	w := &budgetWaiter{n: n, held: held, ready: make(chan struct{})}
	e := b.waiting.PushBack(w)
	b.mu.Unlock()

	t := time.NewTimer(b.wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		return true // served as the wait ended
	default:
	}
	b.waiting.Remove(e)
	// It may have been the oldest, holding up those behind it.
	b.serveLocked()
	return false
}

// give returns n bytes a body had taken.
func (b *bodyBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.serveLocked()
	b.mu.Unlock()
}

// serveLocked gives bytes to the waiting bodies, oldest first, while the
// oldest fits.
func (b *bodyBudget) serveLocked() {
	for e := b.waiting.Front(); e != nil; e = b.waiting.Front() {
		w := e.Value.(*budgetWaiter)
		if !b.fitsLocked(w.n, w.held) {
			return
		}
		b.used += w.n
		b.waiting.Remove(e)
		close(w.ready)
	}
}

// The failures of [bodyBudget.read], each its caller's to answer.
var (
	// errBudgetSpent: the budget could not take the body, left unread.
	errBudgetSpent = errors.New("api: the body budget is spent")
	// errBodyTooLarge: the body is longer than its limit.
	errBodyTooLarge = errors.New("api: the body is over its limit")
	// errBodyLate: the body did not arrive within its timeout.
	errBodyLate = errors.New("api: the body did not arrive in time")
	// errBodyUnread: reading the body failed otherwise.
	errBodyUnread = errors.New("api: the body could not be read")
)

// read reads the body of r (one byte over limit is errBodyTooLarge)
// within timeout, into a buffer charged to b as it grows, writing each
// byte read to tee too when it is not nil. It returns the body and the
// bytes charged for it, which the caller gives back once it is done with
// the body; the charge is zero, given back already, when err is not nil.
// w is r's writer: the read deadline is set through it, unless the body is
// declared at most untimed bytes long (the server's read timeout bounds
// it then: setting a deadline costs every small request a timer's update).
func (b *bodyBudget) read(w http.ResponseWriter, r *http.Request, limit, untimed int64, timeout time.Duration, tee io.Writer) (body []byte, charged int64, err error) {
	defer func() {
		if err != nil {
			b.give(charged)
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
	if !b.takeWaiting(r.Context(), size, size) {
		return nil, 0, errBudgetSpent
	}
	charged = size
	// A read deadline of this request alone: the server's own is for every
	// request, and far longer. (It is reset for the next request on the
	// connection.)
	if r.ContentLength < 0 || r.ContentLength > untimed {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	}
	// MaxBytesReader asks the body for at most limit+1 bytes, and tells
	// net/http to close the connection after a body over it.
	src := http.MaxBytesReader(w, r.Body, limit)
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			// Only a body of unknown length gets here: a declared one ends
			// before its buffer is full.
			next := min(2*int64(cap(buf)), limit+1)
			if next <= int64(cap(buf)) {
				return nil, charged, errBodyTooLarge
			}
			if !b.take(next-int64(cap(buf)), next) {
				return nil, charged, errBudgetSpent
			}
			charged = next
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, rerr := src.Read(buf[len(buf):cap(buf)])
		if tee != nil {
			_, _ = tee.Write(buf[len(buf) : len(buf)+n])
		}
		buf = buf[:len(buf)+n]
		var tooLong *http.MaxBytesError
		switch {
		case rerr == io.EOF:
			return buf, charged, nil
		case rerr == nil:
		case errors.As(rerr, &tooLong):
			return nil, charged, errBodyTooLarge
		case errors.Is(rerr, os.ErrDeadlineExceeded):
			return nil, charged, errBodyLate
		default:
			return nil, charged, errBodyUnread
		}
	}
}

// readCallbackBody reads the callback body of c (one byte over the
// callback limit is its 413), within the callback body timeout, into a
// buffer charged to the callback budget as it grows, writing each byte
// read to mac too. It returns the body and the bytes charged for it,
// which the caller gives back once the signature is checked; the charge
// is zero when err is not nil.
//
// It answers 503 unavailable with Retry-After when the budget cannot take
// the body (and closes the connection: the body is not read), and when the
// body did not arrive in time.
func (s *Server) readCallbackBody(c echo.Context, mac io.Writer) (body []byte, charged int64, err error) {
	body, charged, err = s.callbackBodies.read(c.Response(), c.Request(), s.d.CallbackMaxBodyBytes, 0, s.d.CallbackBodyTimeout, mac)
	switch {
	case err == nil:
		return body, charged, nil
	case errors.Is(err, errBudgetSpent):
		return nil, 0, budgetSpent(c)
	case errors.Is(err, errBodyTooLarge):
		return nil, 0, tooLarge("callback", s.d.CallbackMaxBodyBytes)
	case errors.Is(err, errBodyLate):
		return nil, 0, unavailable(fmt.Sprintf("the callback body did not arrive within %s; redeliver after Retry-After",
			s.d.CallbackBodyTimeout))
	}
	return nil, 0, malformedJSON("the request body could not be read")
}

// budgetSpent is the answer to a callback whose body the budget cannot
// take. The connection is closed after it, as the body is left unread.
func budgetSpent(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderConnection, "close")
	return unavailable("too many callback bodies are awaiting their signature check; redeliver after Retry-After")
}
