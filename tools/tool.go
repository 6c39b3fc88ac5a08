package tools

import "encoding/json"

// Outcomes a [Result] reports. A tool's business failure reports its code
// (toolrun's ToolError.Code) as the outcome, so the list is open; these are
// the ones the journal itself knows.
const (
	// OutcomeOK: the call succeeded.
	OutcomeOK = "ok"
	// OutcomeNotFound: a business failure, the thing the call names does
	// not exist.
	OutcomeNotFound = "not_found"
	// OutcomeInvalidInput: a business failure, the vendor or the tool
	// refused the input.
	OutcomeInvalidInput = "invalid_input"
	// OutcomeFailed: a business failure whose tool named no code.
	OutcomeFailed = "failed"
	// OutcomeUncertain: the call may or may not have had its effect. It is
	// stored like any answer and never retried automatically; a person
	// decides with the evidence in front of them.
	OutcomeUncertain = "uncertain"
)

// Result is the answer of a tool call, live or replayed from the journal.
type Result struct {
	// OK reports whether the call succeeded. A business failure and an
	// uncertain call are not OK.
	OK bool
	// Outcome is [OutcomeOK] for a success, [OutcomeUncertain] for a call
	// that may or may not have had its effect, and the tool's code (such as
	// [OutcomeNotFound] or [OutcomeInvalidInput]) for a business failure.
	// The journal stores OutcomeOK for every OK result a tool returns, and
	// OutcomeFailed for one that is not OK and names no other outcome.
	Outcome string
	// Output is the tool's answer, any JSON value, in canonical form
	// (internal/canonjson) once stored; empty for none.
	Output json.RawMessage
	// Message says what went wrong, for a result that is not OK.
	Message string
	// ResourceType and ResourceID name what the call made, such as
	// "email_message" and the vendor's message id; both or neither.
	ResourceType string
	ResourceID   string
	// OutputOmitted reports that Output was too large to store (the
	// toolrun module's MaxStoredOutput) and is not kept: a tool whose
	// output can grow that large should name a resource that holds it.
	OutputOmitted bool
	// Replayed reports that the result is the journal's stored answer of an
	// earlier attempt, and nothing was called this time.
	Replayed bool
	// ResolvedBy is set on the answer of a call that was uncertain until a
	// person marked it delivered ([Resolver]): the actor who did. The
	// result is then OK with [OutcomeOK], and nothing was called.
	ResolvedBy string
}

// Uncertain reports whether the call may or may not have had its effect.
func (r Result) Uncertain() bool { return r.Outcome == OutcomeUncertain }
