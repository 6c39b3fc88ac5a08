package schedule

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/keyset"
)

// Statuses of an occurrence; Pending and NotReady are open.
const (
	// StatusPending: not yet attempted, or held by a drain now.
	StatusPending = "pending"
	// StatusNotReady: the last attempt failed transiently (Reason); retried
	// at NextAttemptAt until its catch-up window passes.
	StatusNotReady = "not_ready"
	// StatusStarted: it admitted its Run (RunID).
	StatusStarted = "started"
	// StatusRefused: the start refused it for good (Reason).
	StatusRefused = "refused"
	// StatusMissed: due longer ago than its catch-up window; never started.
	StatusMissed = "missed"
)

// Reasons of a refused occurrence.
const (
	ReasonSavedSearchArchived = "saved_search_archived"
	// ReasonOverLimits: the organization is over its limits ([ErrOverLimits]).
	ReasonOverLimits = "over_limits"
	// ReasonInvalid: the start refused its input for good.
	ReasonInvalid = "invalid"
	// ReasonSchedulePaused and ReasonScheduleRemoved: the schedule was paused
	// or removed before the occurrence started.
	ReasonSchedulePaused  = "schedule_paused"
	ReasonScheduleRemoved = "schedule_removed"
)

// Reasons of a not-ready occurrence.
const (
	ReasonUnavailable = "unavailable"
	// ReasonInProgress: another start with the same key holds a live claim.
	ReasonInProgress = "in_progress"
	// ReasonTimeout: the start did not finish within the drain's lease.
	ReasonTimeout = "timeout"
	// ReasonBusy: the start got no seat ([ErrBusy]); retried at the next
	// tick, since seats free quickly.
	ReasonBusy     = "busy"
	ReasonInternal = "internal"
)

// Occurrence is one time a schedule came due.
type Occurrence struct {
	ID            uuid.UUID  `json:"id"`
	SavedSearchID uuid.UUID  `json:"saved_search_id"`
	DueAt         time.Time  `json:"due_at"`
	Status        string     `json:"status"`
	Reason        *string    `json:"reason"`
	RunID         *uuid.UUID `json:"run_id"`
	Attempts      int        `json:"attempts"`
	// Deadline is DueAt plus the catch-up window.
	Deadline time.Time `json:"deadline"`
	// NextAttemptAt is when a drain may take an open occurrence.
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time  `json:"created_at"`
	ClosedAt      *time.Time `json:"closed_at"`
}

// Page sizes of [Store.Occurrences].
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// ListParams are the inputs of [Store.Occurrences].
type ListParams struct {
	// Limit is capped at MaxListLimit; zero or less means DefaultListLimit.
	Limit int
	// Cursor is the previous page's next cursor; empty for the first.
	Cursor string
}

// Occurrences returns a page of the occurrences of org's saved search id
// (live or archived), latest due first, and the next cursor ("" after the
// last), or [ErrSavedSearchNotFound] or [ErrInvalidCursor].
func (s *Store) Occurrences(ctx context.Context, org, id uuid.UUID, p ListParams) (_ []Occurrence, _ string, err error) {
	defer dberr.Annotate(&err)
	q, err := s.cursors.Read(keyset.List{Name: "schedule.occurrences", Org: org, Parent: id}, p.Cursor, p.Limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	var known bool
	if err := s.db.QueryRow(ctx, savedSearchKnown, org, id).Scan(&known); err != nil {
		return nil, "", fmt.Errorf("schedule: occurrences: %w", err)
	}
	if !known {
		return nil, "", ErrSavedSearchNotFound
	}
	// The due time alone orders one saved search's occurrences.
	return keyset.Query(ctx, s.db, "schedule: occurrences", q, scanOccurrence,
		func(o Occurrence) keyset.Position { return keyset.Position{CreatedAt: o.DueAt, ID: o.ID} },
		occurrenceList, org, id, q.At, q.Limit+1)
}

func scanOccurrence(row pgx.CollectableRow) (Occurrence, error) {
	o, err := pgx.RowToStructByPos[Occurrence](row) // occurrenceColumns are in field order
	o.DueAt = o.DueAt.UTC()
	return o, err
}

// Summary is a schedule with its saved search's name and archive state and
// its latest occurrence (nil before the first).
type Summary struct {
	Schedule
	SavedSearchName string      `json:"saved_search_name"`
	ArchivedAt      *time.Time  `json:"archived_at"`
	Last            *Occurrence `json:"last_occurrence"`
}

// List returns a page of org's schedules, newest first, each with its latest
// occurrence, and the next cursor ("" after the last), or [ErrInvalidCursor].
func (s *Store) List(ctx context.Context, org uuid.UUID, p ListParams) (_ []Summary, _ string, err error) {
	defer dberr.Annotate(&err)
	q, err := s.cursors.Read(keyset.List{Name: "schedule.list", Org: org}, p.Cursor, p.Limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	return keyset.Query(ctx, s.db, "schedule: list", q, scanSummary,
		func(sm Summary) keyset.Position {
			return keyset.Position{CreatedAt: sm.CreatedAt, ID: sm.SavedSearchID}
		},
		scheduleList, org, q.At, q.ID, q.Limit+1)
}

func scanSummary(row pgx.CollectableRow) (Summary, error) {
	var (
		sm       Summary
		o        Occurrence
		oid      *uuid.UUID
		oss      *uuid.UUID
		due      *time.Time
		status   *string
		attempts *int
		deadline *time.Time
		created  *time.Time
	)
	err := row.Scan(&sm.OrganizationID, &sm.SavedSearchID, &sm.IntervalSeconds, &sm.Cron, &sm.TimeZone, &sm.StartAt,
		&sm.CatchUpSeconds, &sm.Paused, &sm.NextDueAt, &sm.Version, &sm.UpdatedBy, &sm.CreatedAt, &sm.UpdatedAt,
		&sm.MaxResults, &sm.Note, &sm.SavedSearchName, &sm.ArchivedAt,
		&oid, &oss, &due, &status, &o.Reason, &o.RunID, &attempts, &deadline, &o.NextAttemptAt, &created, &o.ClosedAt)
	if err != nil {
		return Summary{}, err
	}
	sm.StartAt = sm.StartAt.UTC()
	if oid != nil {
		o.ID, o.SavedSearchID, o.DueAt, o.Status = *oid, *oss, due.UTC(), *status
		o.Attempts, o.Deadline, o.CreatedAt = *attempts, *deadline, *created
		sm.Last = &o
	}
	return sm, nil
}
