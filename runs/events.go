package runs

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
)

// Event types: one per status a Run reaches, run.admitted for its
// admission (status queued).
const (
	EventAdmitted   = "run.admitted"
	EventDispatched = "run.dispatched"
	EventRunning    = "run.running"
	EventSucceeded  = "run.succeeded"
	EventFailed     = "run.failed"
	EventCancelled  = "run.cancelled"
)

// EventType is the event type of a change to status: run.admitted for
// queued, run.<status> for the others.
func EventType(status string) string {
	if status == StatusQueued {
		return EventAdmitted
	}
	return "run." + status
}

// Event is one step of a Run's history, as GET /v1/runs/{id}/events sends
// it (the schema RunEvent of the OpenAPI document, the body webhooks carry
// too). Seq is the Run's version after the step: 1 for the admission, then
// one more per status change, so a reader that has seq n has every event
// up to n and asks for the ones after it.
type Event struct {
	RunID      uuid.UUID `json:"run_id"`
	Seq        int64     `json:"seq"`
	Type       string    `json:"type"`
	Status     string    `json:"status"`
	OccurredAt time.Time `json:"occurred_at"`
	// ResultRef is a succeeded Run's result reference, when it has one.
	ResultRef *string `json:"result_ref,omitempty"`
	// Error is how a failed or cancelled Run ended, when it says.
	Error *RunError `json:"error,omitempty"`
}

// Terminal reports whether e is a Run's last event: no event follows it.
func (e Event) Terminal() bool { return Terminal(e.Status) }

// Version returns the version and status of Run id of org: one
// primary-key lookup, what an event stream polls to learn whether the Run
// changed. It returns [ErrNotFound] when org has no Run id (another
// organization's included, or one the sweeper removed).
func (s *Store) Version(ctx context.Context, org, id uuid.UUID) (version int64, status string, err error) {
	defer dberr.Annotate(&err)
	if err := s.db.QueryRow(ctx, runVersion, org, id).Scan(&version, &status); err != nil {
		return 0, "", translate("version", err)
	}
	return version, status, nil
}

// Events returns the events of Run id of org with a seq greater than
// after, oldest first: at most five, as a status only moves forward. A
// Run with none after it, or not org's, has none: call [Store.Version]
// first to tell them apart. after below zero reads them all.
func (s *Store) Events(ctx context.Context, org, id uuid.UUID, after int64) (_ []Event, err error) {
	defer dberr.Annotate(&err)
	rows, err := s.db.Query(ctx, runEvents, org, id, after)
	if err != nil {
		return nil, fmt.Errorf("runs: events: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
		var (
			e             Event
			code, message *string
		)
		err := row.Scan(&e.Seq, &e.Status, &e.OccurredAt, &e.ResultRef, &code, &message)
		e.RunID, e.Type, e.Error = id, EventType(e.Status), runError(code, message)
		e.OccurredAt = e.OccurredAt.UTC()
		return e, err
	})
}
