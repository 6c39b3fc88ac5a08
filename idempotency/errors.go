package idempotency

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrInvalid is wrapped by every [*InputError]: input the plane refuses
	// before it runs any SQL.
	ErrInvalid = errors.New("idempotency: invalid input")
	// ErrUnknownScope reports a scope the registry does not name.
	ErrUnknownScope = errors.New("idempotency: unknown scope")
	// ErrClaimInFlight reports that another worker holds a live lease on the
	// key. Callers that an orchestrator replays return it, so the step fails
	// and runs again; it is never turned into a result. [*InFlightError]
	// matches it with errors.Is.
	ErrClaimInFlight = errors.New("idempotency: claim in flight")
	// ErrFenceLost reports that a completion queued with
	// [Service.QueueComplete] found the lease moved on: another worker
	// reclaimed the key, or the claim already ended. Its transaction was
	// aborted before its COMMIT, so nothing of it was written. Like a false
	// from [Service.Complete], it is not a failure to retry: the key belongs
	// to another worker.
	ErrFenceLost = errors.New("idempotency: claim fence lost")
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
