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

// Until a callback's whole body is in, its signature cannot be checked,
// so anyone can hold server memory with a slow forged body. Unverified
// bodies are therefore charged to a byte budget before buffering (503
// unread when it is spent) and must arrive within a short deadline.
const (
	// DefaultCallbackBodyBudget is 64 default-size callback bodies.
	DefaultCallbackBodyBudget = 64 << 20
	// DefaultCallbackBodyTimeout allows a default-size callback body at
	// 100 KiB/s.
	DefaultCallbackBodyTimeout = 10 * time.Second
	// smallCallbackBody is the largest body that may use the budget's
	// last quarter, so small updates still get in.
	smallCallbackBody = 64 << 10
	// firstUnknownBody is the first charge for a chunked body; it doubles
	// up to the limit.
	firstUnknownBody = 4 << 10
	// DefaultBodyBudget bounds all request bodies read ahead of their
	// seats: four default-size bodies (at least two of the limit set).
	// 64 MiB let 64 connections drive the server to 308 MiB resident.
	DefaultBodyBudget = 16 << 20
	// DefaultBodyTimeout allows a default-size body at 140 KiB/s.
	DefaultBodyTimeout = 30 * time.Second
)

// bodyBudget bounds the buffer bytes bodies hold together. It is safe
// for concurrent use.
type bodyBudget struct {
	// wait is how long a body waits for bytes; zero refuses at once.
	wait  time.Duration
	mu    sync.Mutex
	used  int64
	total int64 // every body together
	large int64 // bodies over smallCallbackBody together: three quarters
	// waiting queues *budgetWaiter first come, first served.
	waiting list.List
	bodyRefusals
}

// bodyRefusals word a budget's refusals: what names its bodies in a 413,
// spent is the 503 detail when it cannot take one, and late the format
// of the 503 detail of one that misses its timeout.
type bodyRefusals struct{ what, spent, late string }

var (
	requestRefusals = bodyRefusals{"request", "too many request bodies are being read or served; retry after Retry-After",
		"the request body did not arrive within %s"}
	callbackRefusals = bodyRefusals{"callback", "too many callback bodies are awaiting their signature check; redeliver after Retry-After",
		"the callback body did not arrive within %s; redeliver after Retry-After"}
)

// budgetWaiter is a waiting body; ready closes once its bytes are taken.
type budgetWaiter struct {
	n, held int64
	ready   chan struct{}
}

func newBodyBudget(total int64, wait time.Duration, r bodyRefusals) *bodyBudget {
	return &bodyBudget{total: total, large: total - total/4, wait: wait, bodyRefusals: r}
}

// fitsLocked reports whether n more bytes fit for a body holding held in
// all; bodies over smallCallbackBody may not take the last quarter.
func (b *bodyBudget) fitsLocked(n, held int64) bool {
	limit := b.total
	if held > smallCallbackBody {
		limit = b.large
	}
	return b.used+n <= limit
}

// take charges n more bytes for a body holding held in all and reports
// whether they fit. It does not jump the queue, except for small bodies,
// and queues up to wait (zero: not at all) or until ctx ends.
func (b *bodyBudget) take(ctx context.Context, n, held int64, wait time.Duration) bool {
	b.mu.Lock()
	if b.fitsLocked(n, held) && (b.waiting.Len() == 0 || held <= smallCallbackBody) {
		b.used += n
		b.mu.Unlock()
		return true
	}
	if wait == 0 {
		b.mu.Unlock()
		return false
	}
	w := &budgetWaiter{n: n, held: held, ready: make(chan struct{})}
	e := b.waiting.PushBack(w)
	b.mu.Unlock()

	t := time.NewTimer(wait)
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
	// It may have been holding up those behind it.
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

// serveLocked serves waiting bodies, oldest first, while the oldest fits.
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

// read reads c's body within timeout into a buffer charged to b, copying
// to tee if non-nil. It returns the body and the charge, which the caller
// gives back when done (zero on error). Bodies declared at most untimed
// bytes skip the per-request deadline and its timer update. It answers
// 413 over limit, 503 with Retry-After when the budget is spent (closing
// the connection, body unread) or the body misses timeout, and 400 when
// the body cannot be read.
func (b *bodyBudget) read(c echo.Context, limit, untimed int64, timeout time.Duration, tee io.Writer) (body []byte, charged int64, err error) {
	w, r := c.Response(), c.Request()
	defer func() {
		if errors.Is(err, errBudgetSpent) {
			w.Header().Set(echo.HeaderConnection, "close")
			err = unavailable(b.spent)
		}
		if err != nil {
			b.give(charged)
			charged = 0
		}
	}()
	if r.ContentLength > limit {
		return nil, 0, tooLarge(b.what, limit)
	}
	size := int64(firstUnknownBody)
	if r.ContentLength >= 0 {
		// One allocation for an honest body and the read that sees EOF.
		size = r.ContentLength + 1
	}
	size = min(size, limit+1)
	if !b.take(r.Context(), size, size, b.wait) {
		return nil, 0, errBudgetSpent
	}
	charged = size
	// A per-request read deadline, shorter than the server's.
	if r.ContentLength < 0 || r.ContentLength > untimed {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	}
	// MaxBytesReader also makes net/http close the connection after.
	src := http.MaxBytesReader(w, r.Body, limit)
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			// Only a body of unknown length gets here.
			next := min(2*int64(cap(buf)), limit+1)
			if next <= int64(cap(buf)) {
				return nil, charged, tooLarge(b.what, limit)
			}
			if !b.take(r.Context(), next-int64(cap(buf)), next, 0) {
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
			return nil, charged, tooLarge(b.what, limit)
		case errors.Is(rerr, os.ErrDeadlineExceeded):
			return nil, charged, unavailable(fmt.Sprintf(b.late, timeout))
		default:
			return nil, charged, malformedJSON("the request body could not be read")
		}
	}
}

// errBudgetSpent is read's word for a budget that cannot take the body.
var errBudgetSpent = errors.New("api: the body budget is spent")
