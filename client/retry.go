package client

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"syscall"
	"time"
)

// RetryPolicy says how often and how long a call retries; the package
// comment says which failures it retries. The zero value is the default
// policy.
type RetryPolicy struct {
	// MaxAttempts is the most attempts one call makes, the first included.
	// Default 10; 1 disables retries.
	MaxAttempts int
	// BaseDelay is the backoff ceiling before the first retry; it doubles
	// with every retry up to MaxDelay, and the wait is drawn uniformly
	// between zero and the ceiling (full jitter). Default 100 ms.
	BaseDelay time.Duration
	// MaxDelay caps the backoff ceiling. Default 5 s; at least BaseDelay.
	MaxDelay time.Duration
	// MaxRetryAfter caps how long a Retry-After header can make the client
	// wait. Default 30 s, the lease of a saved-search start, which bounds
	// how long a start stays in_progress. searchd's Retry-After on
	// in_progress is a hint of when the answer is likely ready (1 s).
	MaxRetryAfter time.Duration
	// PreferWait is the Prefer: wait=N every start sends (RFC 7240): a
	// start that meets another request with its key still being prepared
	// (a double submit) waits on the server up to N seconds for that
	// preparation and answers its result in the same request, instead of
	// a 409 to retry. Whole seconds, at most [MaxPreferWait]; the server
	// may wait less. Default [DefaultPreferWait] (at most half of
	// AttemptTimeout, and none below a second); negative sends none, so
	// a start in progress is retried after Retry-After. It must be shorter
	// than AttemptTimeout, which bounds the attempt that waits.
	PreferWait time.Duration
	// AttemptTimeout bounds one attempt, answer body included; an attempt
	// that runs out is retried like a connection error. Default 30 s. An
	// http.Client Timeout bounds attempts as well.
	AttemptTimeout time.Duration
}

// Defaults of [RetryPolicy].
const (
	DefaultMaxAttempts    = 10
	DefaultBaseDelay      = 100 * time.Millisecond
	DefaultMaxDelay       = 5 * time.Second
	DefaultMaxRetryAfter  = 30 * time.Second
	DefaultAttemptTimeout = 30 * time.Second
	DefaultPreferWait     = 10 * time.Second
	// MaxPreferWait is the most [RetryPolicy.PreferWait] may be: searchd
	// waits at most 30 s.
	MaxPreferWait = 30 * time.Second
)

// WithDefaults returns p with its zero fields set to their defaults.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, DefaultMaxAttempts)
	p.BaseDelay = cmp.Or(p.BaseDelay, DefaultBaseDelay)
	p.MaxDelay = cmp.Or(p.MaxDelay, max(DefaultMaxDelay, p.BaseDelay))
	p.MaxRetryAfter = cmp.Or(p.MaxRetryAfter, DefaultMaxRetryAfter)
	p.AttemptTimeout = cmp.Or(p.AttemptTimeout, DefaultAttemptTimeout)
	if p.PreferWait == 0 {
		// The default, within an attempt: at most half of AttemptTimeout,
		// so the attempt that waits has time to carry the answer back.
		p.PreferWait = min(DefaultPreferWait, (p.AttemptTimeout / 2).Truncate(time.Second))
		if p.PreferWait < time.Second {
			p.PreferWait = -1
		}
	}
	return p
}

// Validate returns an error naming the first field of p out of its range,
// or nil. Zero fields are valid: they take their defaults.
func (p RetryPolicy) Validate() error {
	switch {
	case p.MaxAttempts < 0:
		return fmt.Errorf("client: Retry.MaxAttempts is %d; it must be at least 1 (0 means %d)", p.MaxAttempts, DefaultMaxAttempts)
	case p.BaseDelay < 0:
		return fmt.Errorf("client: Retry.BaseDelay is %s; it must be positive (0 means %s)", p.BaseDelay, DefaultBaseDelay)
	case p.MaxDelay < 0:
		return fmt.Errorf("client: Retry.MaxDelay is %s; it must be positive (0 means %s)", p.MaxDelay, DefaultMaxDelay)
	case p.MaxDelay > 0 && p.MaxDelay < cmp.Or(p.BaseDelay, DefaultBaseDelay):
		return fmt.Errorf("client: Retry.MaxDelay is %s; it must be at least Retry.BaseDelay (%s)",
			p.MaxDelay, cmp.Or(p.BaseDelay, DefaultBaseDelay))
	case p.PreferWait > MaxPreferWait || (p.PreferWait > 0 && p.PreferWait%time.Second != 0):
		return fmt.Errorf("client: Retry.PreferWait is %s; it must be whole seconds up to %s (0 means %s, negative none)", p.PreferWait, MaxPreferWait, DefaultPreferWait)
	case p.PreferWait > 0 && p.PreferWait >= cmp.Or(p.AttemptTimeout, DefaultAttemptTimeout):
		return fmt.Errorf("client: Retry.PreferWait %s must be shorter than AttemptTimeout %s, which bounds the attempt that waits",
			p.PreferWait, cmp.Or(p.AttemptTimeout, DefaultAttemptTimeout))
	case p.MaxRetryAfter < 0:
		return fmt.Errorf("client: Retry.MaxRetryAfter is %s; it must be positive (0 means %s)", p.MaxRetryAfter, DefaultMaxRetryAfter)
	case p.AttemptTimeout < 0:
		return fmt.Errorf("client: Retry.AttemptTimeout is %s; it must be positive (0 means %s)", p.AttemptTimeout, DefaultAttemptTimeout)
	}
	return nil
}

// delay returns the wait before retry number n (1 for the first retry) of
// a failure whose answer asked for serverDelay (zero when it did not). p
// has its defaults.
func (p RetryPolicy) delay(n int, serverDelay time.Duration) time.Duration {
	ceiling := p.BaseDelay
	for i := 1; i < n && ceiling < p.MaxDelay; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, p.MaxDelay)
	// Full jitter: clients that failed together spread out instead of
	// returning together.
	wait := rand.N(ceiling + 1)
	if serverDelay > 0 {
		// The server knows when its lease ends or its database returns;
		// earlier would only meet the same answer.
		wait = max(wait, min(serverDelay, p.MaxRetryAfter))
	}
	return wait
}

// safety says which failures of a request may be retried.
type safety int

const (
	// dialOnly is a write without an Idempotency-Key: a repeat could apply
	// it twice, so it is retried only when it never left the client.
	dialOnly safety = iota
	// repeatable is a read, a keyed start or a provider job registration
	// (which the provider job id keys): a repeat has no further effect, so
	// every transient failure is retried.
	repeatable
)

// retryable reports whether err, the failure of one attempt of a request
// with safety s, may be retried, and the delay its answer asked for.
func retryable(s safety, err error) (bool, time.Duration) {
	var ae *APIError
	if errors.As(err, &ae) {
		if s != repeatable {
			return false, 0
		}
		switch ae.Status {
		case http.StatusConflict:
			return ae.Code == codeInProgress, ae.RetryAfter
		case http.StatusTooManyRequests, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true, ae.RetryAfter
		}
		return false, 0
	}
	var te *transportError
	if !errors.As(err, &te) {
		return false, 0 // a token source's error, a body that would not encode
	}
	switch {
	case notSent(te.err):
		return true, 0
	case s == repeatable:
		return te.attemptTimedOut || connectionLost(te.err), 0
	}
	return false, 0
}

// notSent reports whether err proves the request never reached the
// server: the connection to it could not be made.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// connectionLost reports whether err is a failure of the connection rather
// than of the request itself: reset, closed before the whole answer came,
// or timed out. A certificate the client refuses, a malformed URL or a
// header net/http will not send are none of these, and retrying them
// would fail the same way.
func connectionLost(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, net.ErrClosed):
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	}
	var op *net.OpError
	return errors.As(err, &op)
}
