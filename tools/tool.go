package tools

import "encoding/json"

// Outcomes a [Result] reports. A business failure reports its tool's code
// (toolrun's ToolError.Code), so the list is open.
const (
	OutcomeOK           = "ok"
	OutcomeNotFound     = "not_found"
	OutcomeInvalidInput = "invalid_input"
	// OutcomeFailed is a business failure whose tool named no code.
	OutcomeFailed = "failed"
	// OutcomeUncertain is a call that may or may not have had its effect.
	// It is never retried automatically; a person decides ([Resolver]).
	OutcomeUncertain = "uncertain"
)

// Result is the answer of a tool call, live or replayed from the journal.
// Its JSON form is the stored answer ([EncodeAnswer]); the resource is in
// the claim's own columns.
type Result struct {
	OK bool `json:"ok"`
	// Outcome is [OutcomeOK], [OutcomeUncertain], or a business failure's
	// code ([OutcomeFailed] when the tool named none).
	Outcome string `json:"outcome"`
	// Output is any JSON value, in canonical form once stored; empty for
	// none.
	Output json.RawMessage `json:"output,omitempty"`
	// OutputOmitted reports that Output was too large to store (toolrun's
	// MaxStoredOutput).
	OutputOmitted bool   `json:"output_omitted,omitempty"`
	Message       string `json:"message,omitempty"` // what went wrong, when not OK
	// ResolvedBy is the actor who marked an uncertain call delivered; the
	// result is then OK.
	ResolvedBy string `json:"resolved_by,omitempty"`
	// ResourceType and ResourceID name what the call made, such as
	// "email_message" and the vendor's id; both or neither.
	ResourceType string `json:"-"`
	ResourceID   string `json:"-"`
	// Replayed reports that the result is a stored answer and nothing was
	// called.
	Replayed bool `json:"-"`
}

// Uncertain reports whether the call may or may not have had its effect.
func (r Result) Uncertain() bool { return r.Outcome == OutcomeUncertain }
