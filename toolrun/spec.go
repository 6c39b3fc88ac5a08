package toolrun

import (
	"fmt"
	"time"

	"github.com/searchd/searchd/idempotency"
)

const (
	// StepBudget is the longest a tool call may run: the budget of the
	// orchestrator step it runs in. [ToolSpec.Validate] refuses a longer
	// timeout.
	StepBudget = 120 * time.Second

	// MinLeaseMargin is the least time a lease adds to the tool's timeout.
	// See [ToolSpec.Lease].
	MinLeaseMargin = 15 * time.Second
)

// ToolSpec describes a tool to the journal.
type ToolSpec struct {
	// Name is the tool's name, a dotted lower-case identifier such as
	// "email.send". Its scope is "tool." + Name.
	Name string
	// Timeout bounds one call of the tool: it is the deadline of the context
	// the tool is called with. It is positive and at most [StepBudget].
	Timeout time.Duration
	// VendorIdempotency reports whether the tool's vendor honours an
	// idempotency key: it answers a repeated key with the first request's
	// result instead of acting again. When true the call's key is passed to
	// the tool as [CallContext.IdempotencyKey], and a call that ended without
	// an answer may be released and retried. Set it only for a vendor that
	// documents the guarantee; false is the safe default.
	VendorIdempotency bool
}

// Scope returns the claim scope of the tool's calls, "tool." + Name.
func (s ToolSpec) Scope() string { return idempotency.ToolScopePrefix + s.Name }

// Lease returns how long a claim on one call is held before another worker
// may reclaim it: the timeout plus a margin of a quarter of it, and at least
// [MinLeaseMargin]. A 30 s tool holds 45 s, a 120 s tool 150 s.
//
// The lease is derived from the timeout, never a fixed constant, because a
// fixed lease shorter than a tool's timeout lets a second worker reclaim the
// key while the first is still inside its call. The margin covers what runs
// under the claim besides the call: the claim itself and the completion.
// It must pass before the orchestrator's last retry of the step, or every
// retry meets the lease of a worker that died and the Run fails on it.
//
// The retention, how long the answer is remembered, is another clock: the
// plane's [idempotency.ToolRetention] for every tool, so that a Run waiting
// on an approval for days still replays its calls.
func (s ToolSpec) Lease() time.Duration {
	return s.Timeout + max(MinLeaseMargin, s.Timeout/4)
}

// Validate returns an error wrapping [ErrInvalid] that names the field when
// the spec cannot be used.
func (s ToolSpec) Validate() error {
	if _, err := idempotency.Retention(s.Scope()); err != nil {
		return fmt.Errorf("%w: tool name %q must be a dotted lower-case identifier of at most 100 bytes", ErrInvalid, s.Name)
	}
	if s.Timeout <= 0 || s.Timeout > StepBudget {
		return fmt.Errorf("%w: tool %s: Timeout %v must be positive and at most %v", ErrInvalid, s.Name, s.Timeout, StepBudget)
	}
	return nil
}
