package idempotency

import (
	"errors"
	"fmt"
	"time"

	"github.com/searchd/searchd/errs"
)

// The plane's errors carry the kinds of package errs: [ErrInvalid] and
// [*InputError] are errs.Invalid, [ErrClaimInFlight] and [*InFlightError]
// errs.InProgress, [ErrKeyReused] errs.KeyReused; a transient database
// failure from a [Service] method is an errs.Unavailable wrapping the
// driver's error (internal/dberr), so errors.As still finds a
// *pgconn.PgError in it.
var (
	// ErrInvalid is wrapped by every [*InputError]: input the plane refuses
	// before it runs any SQL.
	ErrInvalid = errs.New(errs.Invalid, "idempotency: invalid input")
	// ErrUnknownScope reports a scope the registry does not name.
	ErrUnknownScope = errors.New("idempotency: unknown scope")
	// ErrClaimInFlight reports that another worker holds a live lease on the
	// key. Callers that an orchestrator replays return it, so the step fails
	// and runs again; it is never turned into a result. [*InFlightError]
	// matches it with errors.Is.
	ErrClaimInFlight = errs.New(errs.InProgress, "idempotency: claim in flight")
	// ErrFenceLost reports that a completion queued with
	// [Service.QueueComplete] found the lease moved on: another worker
	// reclaimed the key, or the claim already ended. Its transaction was
	// aborted before its COMMIT, so nothing of it was written. Like a false
	// from [Service.Complete], it is not a failure to retry: the key belongs
	// to another worker.
	ErrFenceLost = errors.New("idempotency: claim fence lost")
	// ErrKeyReused reports a key claimed before for a different request
	// hash ([KindConflict]) where an error is the answer, as
	// [Service.CreateOnce] gives it: a retry with the key never succeeds.
	ErrKeyReused = errs.New(errs.KeyReused, "idempotency: key reused for a different request")
)

// sqlStateFenceLost is the SQLSTATE agent.idempotency_fence_lost raises
// (migration 00012).
const sqlStateFenceLost = "SD409"

// InputError names the field the plane refused and why. It matches
// [ErrInvalid] with errors.Is.
type InputError struct {
	Field  string
	Reason string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("idempotency: invalid %s: %s", e.Field, e.Reason)
}

// Is reports whether target is [ErrInvalid].
func (e *InputError) Is(target error) bool { return target == ErrInvalid }

// InFlightError is the error form of a processing outcome. RetryAfter is the
// time until the holder's lease passes, by the database clock, so an HTTP edge
// can answer Retry-After. It matches [ErrClaimInFlight] with errors.Is.
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

// ErrorKind returns [errs.Invalid]: the plane refused the input before it
// ran any SQL.
func (e *InputError) ErrorKind() errs.Kind { return errs.Invalid }

// ErrorCode returns invalid_idempotency_key for a refused key: a key is
// the client's own, not a field of its input. Any other field has its
// kind's code.
func (e *InputError) ErrorCode() string {
	if e.Field == "key" {
		return "invalid_idempotency_key"
	}
	return ""
}

// ErrorDetail says why a key was refused; any other field, a caller's
// bug, is told nothing more than its kind.
func (e *InputError) ErrorDetail() string {
	if e.Field == "key" {
		return "the idempotency key " + e.Reason
	}
	return ""
}

// ErrorKind returns [errs.InProgress]: a retry after RetryAfter is
// answered.
func (e *InFlightError) ErrorKind() errs.Kind { return errs.InProgress }

// RetryAfterSeconds returns d rounded up to whole seconds, at least 1: the
// one rounding of every Retry-After searchd gives, since a client told to
// retry after 0 seconds would meet the same live lease.
func RetryAfterSeconds(d time.Duration) int {
	return int(max(time.Second, (d+time.Second-1).Truncate(time.Second)) / time.Second)
}
