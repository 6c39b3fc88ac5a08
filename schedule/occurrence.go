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

// Statuses of an occurrence. Pending and NotReady are open; the rest are
// final, and every occurrence ends in exactly one of them.
const (
	// StatusPending is an occurrence not yet attempted (or held by a
	// drain right now).
	StatusPending = "pending"
	// StatusNotReady is an occurrence whose last attempt failed for a
	// transient reason (its Reason); it is retried at NextAttemptAt, an
	// hour later, and missed once past its catch-up window.
	StatusNotReady = "not_ready"
	// StatusStarted is an occurrence that admitted its Run (RunID).
	StatusStarted = "started"
	// StatusRefused is an occurrence the start refused, for good (Reason).
	StatusRefused = "refused"
	// StatusMissed is an occurrence due more than its catch-up window ago
	// when a drain reached it: closed, never started.
	StatusMissed = "missed"
)

// Reasons of a refused occurrence.
const (
	// ReasonSavedSearchArchived: the saved search was archived (the start
	// found no live saved search).
	ReasonSavedSearchArchived = "saved_search_archived"
	// ReasonOverLimits: a gate in front of the start refused the
	// organization for being over its limits ([ErrOverLimits]).
	ReasonOverLimits = "over_limits"
	// ReasonInvalid: the start refused its input (its key or options), a
	// refusal that would repeat.
	ReasonInvalid = "invalid"
	// ReasonSchedulePaused and ReasonScheduleRemoved: the schedule was
	// paused, or removed, before the occurrence was started.
	ReasonSchedulePaused  = "schedule_paused"
	ReasonScheduleRemoved = "schedule_removed"
)

// Reasons of a not-ready occurrence: the kind of transient failure.
const (
	// ReasonUnavailable: the database could not be used.
	ReasonUnavailable = "unavailable"
	// ReasonInProgress: another start with the occurrence's key held a
	// live claim (a drain that took it before, stalled or slow).
	ReasonInProgress = "in_progress"
	// ReasonTimeout: the start did not finish within the drain's lease.
	ReasonTimeout = "timeout"
	// ReasonBusy: the admission queue refused the start a seat (every
	// seat taken and the organization's turn not come within the longest
	// wait; the StartFunc's error wraps [ErrBusy]). Unlike the others it is
	// tried again at the drain's next tick, not after RetryAfter: the
	// seats free as soon as the load passes.
	ReasonBusy = "busy"
	// ReasonInternal: any other failure.
	ReasonInternal = "internal"
)

// Occurrence is one time a schedule came due.
type Occurrence struct {
	ID            uuid.UUID `json:"id"`
	SavedSearchID uuid.UUID `json:"saved_search_id"`
	// DueAt is when the schedule came due: with the organization and the
	// saved search, the occurrence's natural key.
	DueAt  time.Time `json:"due_at"`
	Status string    `json:"status"`
	// Reason says why a refused or not-ready occurrence is so; nil for
	// the other statuses.
	Reason *string `json:"reason"`
	// RunID is the Run a started occurrence admitted.
	RunID *uuid.UUID `json:"run_id"`
	// Attempts counts the starts tried.
	Attempts int `json:"attempts"`
	// Deadline is DueAt plus the catch-up window: an occurrence open past
	// it is missed.
	Deadline time.Time `json:"deadline"`
	// NextAttemptAt is, for an open occurrence, the earliest a drain takes
	// it (again); nil once it is closed.
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time  `json:"created_at"`
	// ClosedAt is when it got its final status; nil while it is open.
	ClosedAt *time.Time `json:"closed_at"`
}

// Page sizes of [Store.Occurrences].
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// ListParams are the inputs of [Store.Occurrences].
type ListParams struct {
	// Limit is the page size: 1 to MaxListLimit; zero or less means
	// DefaultListLimit, more means MaxListLimit.
	Limit int
	// Cursor is the next cursor a previous page returned; empty for the
	// first page.
	Cursor string
}

// Occurrences returns a page of the occurrences of org's saved search id,
// live or archived, latest due first, and the cursor of the next page (""
// after the last). It returns [ErrSavedSearchNotFound] when org has no
// such saved search and [ErrInvalidCursor] for a cursor it did not write.
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
	// The due time alone orders one saved search's occurrences (it is
	// their key), so the cursor's position holds it and the id rides
	// along unread.
	return keyset.Query(ctx, s.db, "schedule: occurrences", q, scanOccurrence,
		func(o Occurrence) keyset.Position { return keyset.Position{CreatedAt: o.DueAt, ID: o.ID} },
		occurrenceList, org, id, q.At, q.Limit+1)
}

// scanOccurrence scans occurrenceColumns.
func scanOccurrence(row pgx.CollectableRow) (Occurrence, error) {
	var o Occurrence
	err := row.Scan(&o.ID, &o.SavedSearchID, &o.DueAt, &o.Status, &o.Reason, &o.RunID, &o.Attempts, &o.Deadline,
		&o.NextAttemptAt, &o.CreatedAt, &o.ClosedAt)
	o.DueAt = o.DueAt.UTC()
	return o, err
}

// Summary is one schedule of an organization's overview: the schedule,
// its saved search's name and whether it is archived, and the latest
// occurrence it came due with (nil before the first).
type Summary struct {
	Schedule
	SavedSearchName string      `json:"saved_search_name"`
	ArchivedAt      *time.Time  `json:"archived_at"`
	Last            *Occurrence `json:"last_occurrence"`
}

// List returns a page of org's schedules, the newest set first (by when
// each was created, then its saved search's id), each with its saved
// search's name and its latest occurrence, and the cursor of the next
// page ("" after the last). Limit is as in [ListParams]. It returns
// [ErrInvalidCursor] for a cursor it did not write. An organization holds
// at most [Store.Limit] schedules, so a page reads at most that many rows
// of its own, by the primary key's organization prefix.
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

// scanSummary scans scheduleList's row: scheduleColumns, the saved
// search's name and archive time, and occurrenceColumns of the latest
// occurrence (all NULL before the first).
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
