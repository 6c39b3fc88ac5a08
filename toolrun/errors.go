package toolrun

import (
	"errors"
	"fmt"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/tools"
)

var (
	// ErrInvalid is [tools.ErrInvalid], wrapped by every error about a
	// spec, call or key input refused before anything is read or written.
	ErrInvalid = tools.ErrInvalid

	// ErrApprovalRequired reports that the policy checkpoint wants a
	// person's approval before the call runs. Nothing was claimed or called:
	// once the call is approved, Execute it again with a checkpoint that
	// allows it.
	ErrApprovalRequired = errors.New("tools: call needs approval")

	// ErrDenied reports that the policy checkpoint refused the call. Nothing
	// was claimed or called.
	ErrDenied = errors.New("tools: call denied by policy")

	// ErrClaimInFlight is [idempotency.ErrClaimInFlight]: another worker
	// holds a live claim on the call. Execute returns it as an
	// [*idempotency.InFlightError], whose RetryAfter says when the lease
	// passes. It is never a result: the effect may be in flight, so the
	// caller's step fails and is retried.
	ErrClaimInFlight = idempotency.ErrClaimInFlight

	// ErrFenceLost reports that this worker's claim ended without it: its
	// lease passed, another worker reclaimed the call, and the plane refused
	// this worker's completion or release. Execute then writes nothing more
	// and returns no result, because the call's answer is the other worker's
	// to store. Retrying the step is safe: it reads that answer from the
	// journal, or meets the other worker's live claim.
	ErrFenceLost = errors.New("tools: claim fence lost")

	// ErrKeyConflict reports that the call's key is stored for a different
	// request. The key covers the request, so this means the key derivation
	// changed under a stored claim; the call is not made.
	ErrKeyConflict = errors.New("tools: key stored for a different request")
)

// ToolError is how a tool reports a call that did not succeed, and which of
// the claim's endings that failure takes:
//
//   - Uncertain: the call may have had its effect and no acknowledgement
//     came back (a vendor without idempotency support timed out after the
//     request was sent). The claim completes with [OutcomeUncertain]; it is
//     surfaced and never retried automatically. Uncertain wins over
//     Retryable.
//   - Retryable: the call made no effect, or the vendor dedupes a repeat by
//     the key (a 429, a 5xx, a timeout before the request was sent or to a
//     vendor that honours the key). The claim is released and Execute
//     returns the error, so the next attempt runs.
//   - Neither: a business failure, an answer (not_found, invalid_input).
//     The claim completes with Code as the outcome, so a repeat returns it.
type ToolError struct {
	// Code names the failure, such as "not_found" or "invalid_input". A
	// business failure's Code is its result's Outcome; empty is "failed".
	Code      string
	Retryable bool
	Uncertain bool
	Err       error
}

func (e *ToolError) Error() string {
	kind := "failed"
	switch {
	case e.Uncertain:
		kind = "uncertain"
	case e.Retryable:
		kind = "retryable"
	}
	if e.Err == nil {
		return fmt.Sprintf("tool call %s (%s)", kind, e.Code)
	}
	return fmt.Sprintf("tool call %s (%s): %v", kind, e.Code, e.Err)
}

// Unwrap returns the underlying error.
func (e *ToolError) Unwrap() error { return e.Err }
