package toolrun

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/searchd/searchd/tools"
)

// Result is the answer of a tool call, live or replayed from the journal:
// the server's [tools.Result], which reads the same stored answers.
type Result = tools.Result

// The outcomes a [Result] reports: [tools.OutcomeOK] and the rest.
const (
	OutcomeOK           = tools.OutcomeOK
	OutcomeNotFound     = tools.OutcomeNotFound
	OutcomeInvalidInput = tools.OutcomeInvalidInput
	OutcomeFailed       = tools.OutcomeFailed
	OutcomeUncertain    = tools.OutcomeUncertain
)

// Tool is one effectful tool. A tool knows its vendor; the journal around it
// ([Runner]) knows when to call it.
type Tool interface {
	// Call makes the call with input, the canonical JSON the call's key was
	// derived from, within ctx's deadline (the spec's Timeout). It returns a
	// [Result] for a success, and a [*ToolError] for a failure, whose fields
	// say whether the claim completes (a business failure), is released
	// (retryable) or completes as uncertain. Any other error is read as a
	// call that ended without an answer: retryable when the vendor honours
	// the key, uncertain when it does not.
	Call(ctx context.Context, cc CallContext, input json.RawMessage) (Result, error)
}

// CallContext is what a [Tool] is told about the call it makes.
type CallContext struct {
	// IdempotencyKey is the call's key, set when the spec says its vendor
	// honours one (VendorIdempotency) and empty otherwise. The tool sends
	// it to the vendor as the vendor's idempotency key, so a retry after a
	// crash that followed the vendor's acceptance is deduplicated there.
	IdempotencyKey string
	OrganizationID uuid.UUID
	RunID          uuid.UUID
	// Occurrence is the call's occurrence in the Run, from 1.
	Occurrence int
	// ToolCallID is the model's id for this call, for logs and traces only.
	ToolCallID string
}
