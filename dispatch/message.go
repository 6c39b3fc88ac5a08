package dispatch

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// MessageType is the type of every delivery: a Run was admitted and is
// handed to the runtime.
const MessageType = "run.admitted"

// Message is the body of a delivery, a Standard Webhooks message: its
// type, a timestamp (the Run's admission, so that every redelivery is the
// same bytes) and its data. Only what never changes about a Run is in it,
// which is why a redelivery is byte for byte the first delivery: its
// status is the runtime's to report, not to be told.
type Message struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      MessageData `json:"data"`
}

// MessageData is what the runtime needs to execute the Run and report on
// it.
type MessageData struct {
	Run MessageRun `json:"run"`
	// Snapshot is the frozen input of a saved-search Run, whole (brief and
	// baseline); null for a direct Run, whose input is Run.Input.
	Snapshot *MessageSnapshot `json:"snapshot"`
	// StatusURL is the path, relative to searchd's base URL, where the
	// runtime reports the Run's status (PUT, with a runtime credential).
	StatusURL string `json:"status_url"`
}

// MessageRun is the Run as admitted: the fields of the API's Run that never
// change (no status, version or result).
type MessageRun struct {
	ID             uuid.UUID       `json:"id"`
	OrganizationID uuid.UUID       `json:"organization_id"`
	Kind           string          `json:"kind"`
	Name           *string         `json:"name"`
	SavedSearchID  *uuid.UUID      `json:"saved_search_id"`
	SnapshotID     *uuid.UUID      `json:"snapshot_id"`
	Options        json.RawMessage `json:"options"`
	Input          json.RawMessage `json:"input"`
	CreatedBy      *string         `json:"created_by"`
	CreatedAt      time.Time       `json:"created_at"`
	IdempotencyKey string          `json:"idempotency_key"`
}

// MessageSnapshot is a saved-search Run's snapshot, as GET
// /v1/snapshots/{id} answers it (but for organization_id, which the Run
// carries): brief and baseline as stored.
type MessageSnapshot struct {
	ID                 uuid.UUID       `json:"id"`
	SavedSearchID      uuid.UUID       `json:"saved_search_id"`
	SavedSearchVersion int64           `json:"saved_search_version"`
	Brief              json.RawMessage `json:"brief"`
	Baseline           json.RawMessage `json:"baseline"`
	ContentHash        string          `json:"content_hash"`
	CreatedBy          *string         `json:"created_by"`
	CreatedAt          time.Time       `json:"created_at"`
}

// CancelMessageType is the type of a cancel request: a Run the runtime was
// handed (or may have been) is cancelled, and should stop.
const CancelMessageType = "run.cancel_requested"

// CancelMessage is the body of a cancel request, a Standard Webhooks
// message: its type, a timestamp (when the cancel was asked for, so every
// redelivery is the same bytes) and its data. Its webhook-id is
// [CancelMessageID] of the Run.
type CancelMessage struct {
	Type      string            `json:"type"`
	Timestamp time.Time         `json:"timestamp"`
	Data      CancelMessageData `json:"data"`
}

// CancelMessageData names the Run to stop and where to report it.
type CancelMessageData struct {
	Run CancelMessageRun `json:"run"`
	// Reason is the canceller's, for a person; nil for none.
	Reason *string `json:"reason"`
	// StatusURL is where the runtime reports the Run cancelled (PUT).
	StatusURL string `json:"status_url"`
}

// CancelMessageRun identifies the Run of a cancel request.
type CancelMessageRun struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
}

// CancelMessageID returns the webhook-id of Run runID's cancel request:
// distinct from the Run's own delivery (the Run id), the same on every
// redelivery.
func CancelMessageID(runID uuid.UUID) string { return "cancel_" + runID.String() }

// StatusPath returns the path of Run runID's status reports.
func StatusPath(runID uuid.UUID) string { return "/v1/runs/" + runID.String() + "/status" }
