package idempotency

import (
	"errors"
	"fmt"
	"time"

	"github.com/searchd/searchd/errs"
)

// Errors carry the kinds of package errs; a transient database failure is an
// errs.Unavailable wrapping the driver error.
var (
	// ErrInvalid is wrapped by every [*InputError].
	ErrInvalid = errs.New(errs.Invalid, "idempotency: invalid input")
	// ErrUnknownScope reports a scope the registry does not name.
	ErrUnknownScope = errors.New("idempotency: unknown scope")
	// ErrClaimInFlight reports another worker's live lease on the key.
	ErrClaimInFlight = errs.New(errs.InProgress, "idempotency: claim in flight")
	// ErrFenceLost reports that a [Service.QueueComplete] completion found the
	// lease taken over or the claim ended; its transaction was aborted and
	// nothing written. Do not retry.
	ErrFenceLost = errors.New("idempotency: claim fence lost")
	// ErrKeyReused reports a key already claimed for a different request.
	ErrKeyReused = errs.New(errs.KeyReused, "idempotency: key reused for a different request")
)

const sqlStateFenceLost = "SD409"

// InputError names a refused input field and why. It matches [ErrInvalid].
type InputError struct {
	Field  string
	Reason string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("idempotency: invalid %s: %s", e.Field, e.Reason)
}

// Is reports whether target is [ErrInvalid].
func (e *InputError) Is(target error) bool { return target == ErrInvalid }

// InFlightError is a processing outcome as an error; RetryAfter is the time
// until the holder's lease passes. It matches [ErrClaimInFlight].
type InFlightError struct {
	Scope      string
	Key        string
	RetryAfter time.Duration
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("idempotency: claim in flight on %s key %q; lease passes in %s", e.Scope, e.Key, e.RetryAfter)
}

// Is reports whether target is [ErrClaimInFlight].
func (e *InFlightError) Is(target error) bool { return target == ErrClaimInFlight }

// ErrorKind returns [errs.Invalid].
func (e *InputError) ErrorKind() errs.Kind { return errs.Invalid }

// ErrorCode returns invalid_idempotency_key for a refused key, else "".
func (e *InputError) ErrorCode() string {
	if e.Field == "key" {
		return "invalid_idempotency_key"
	}
	return ""
}

// ErrorDetail says why a key was refused; other fields get no detail.
func (e *InputError) ErrorDetail() string {
	if e.Field == "key" {
		return "the idempotency key " + e.Reason
	}
	return ""
}

// ErrorKind returns [errs.InProgress].
func (e *InFlightError) ErrorKind() errs.Kind { return errs.InProgress }

// RetryAfterSeconds returns d rounded up to whole seconds, at least 1, so a
// client never retries at once into the same live lease.
func RetryAfterSeconds(d time.Duration) int {
	return int(max(time.Second, (d+time.Second-1).Truncate(time.Second)) / time.Second)
}
