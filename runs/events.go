package runs

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
)

// Event types.
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

// Event is one step of a Run's history, as the events endpoint and webhooks
// send it. Seq is the Run's version after the step.
type Event struct {
	RunID      uuid.UUID `json:"run_id"`
	Seq        int64     `json:"seq"`
	Type       string    `json:"type"`
	Status     string    `json:"status"`
	OccurredAt time.Time `json:"occurred_at"`
	ResultRef  *string   `json:"result_ref,omitempty"`
	Error      *RunError `json:"error,omitempty"`
}

// Terminal reports whether e is a Run's last event.
func (e Event) Terminal() bool { return Terminal(e.Status) }

// Version returns the version and status of Run id of org, or [ErrNotFound].
func (s *Store) Version(ctx context.Context, org, id uuid.UUID) (version int64, status string, err error) {
	defer dberr.Annotate(&err)
	if err := s.db.QueryRow(ctx, runVersion, org, id).Scan(&version, &status); err != nil {
		return 0, "", translate("version", err)
	}
	return version, status, nil
}

// Events returns the events of Run id of org with seq > after, oldest first
// (at most five); negative after reads all. An unknown Run has none.
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
