package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/outbound"
	"github.com/searchd/searchd/internal/shardpass"
	"github.com/searchd/searchd/internal/sqlarg"
)

// Errors carry the kinds of package errs; a method that runs SQL returns a
// transient database failure as an errs.Unavailable wrapping the driver's.
var (
	// ErrNotFound reports a Run without a dispatch in the organization.
	ErrNotFound = errs.New(errs.NotFound, "dispatch: not found")
	// ErrNotFailed reports a retry of a dispatch that is not failed.
	ErrNotFailed = errs.New(errs.Conflict, "dispatch: only a failed dispatch can be retried")
	// ErrInvalid reports input refused before any SQL.
	ErrInvalid = errs.New(errs.Invalid, "dispatch: invalid input")
)

// States of a dispatch.
const (
	StatePending    = "pending"
	StateDispatched = "dispatched"
	StateFailed     = "failed"
	// StateCancelled is a dispatch whose Run was cancelled before delivery.
	StateCancelled = "cancelled"
)

// Outcome is how a delivery attempt ended.
type Outcome string

// The outcomes of an attempt. One still OutcomeInFlight after its lease
// passed was cut short (its dispatcher died or stalled).
const (
	OutcomeInFlight  Outcome = "in_flight"
	OutcomeDelivered Outcome = "delivered"
	OutcomeRetry     Outcome = "retry"
	OutcomeFailed    Outcome = "failed"
)

// KeptAttempts is how many attempts of one dispatch are kept, the newest:
// a runtime down for days would otherwise grow a dispatch's history
// without bound. The dispatch's own row counts every attempt.
const KeptAttempts = 100

// MaxAnswerLen bounds the answer recorded with an attempt, in characters.
const MaxAnswerLen = 2000

// Limits of [RetryParams].
const (
	MaxActorBytes = 255
	MaxReasonLen  = 500
)

// DBTX is a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type DBTX = shardpass.DB

// Store reads and writes the outbox. It is safe for concurrent use.
type Store struct {
	db    DBTX
	clock *dbclock.Clock
}

// NewStore returns a store on db; a nil clock is the database's now().
func NewStore(db DBTX, clock *dbclock.Clock) *Store { return &Store{db: db, clock: clock} }

// Leased is a dispatch a lease pass took; Attempt is its fence.
type Leased struct {
	OrganizationID uuid.UUID
	RunID          uuid.UUID
	Attempt        int
	// Cancel is set for a cancel request rather than a dispatch.
	Cancel bool
}

// LeasePass leases at most limit due cancel requests and dispatches (the
// cancel requests first) for lease and starts an attempt for each (see
// dispatchLease), one statement per shard as [outbound.Lease]. Replicas
// running passes at once lease disjoint sets. It returns what it leased,
// none when nothing is due, with the failures of a cluster's shards joined.
func (s *Store) LeasePass(ctx context.Context, limit int, lease time.Duration) (all []Leased, err error) {
	defer dberr.Annotate(&err)
	if limit < 1 || lease <= 0 {
		return nil, fmt.Errorf("%w: a lease pass needs a positive limit and lease, got %d and %s", ErrInvalid, limit, lease)
	}
	clock, err := shardpass.Clock(ctx, s.db, s.clock.Arg())
	if err != nil {
		return nil, fmt.Errorf("dispatch: lease: read the clock: %w", err)
	}
	// Cancel requests first: they are few, and each stops work the
	// runtime would do for nothing.
	all, err = outbound.Lease(ctx, s.db, leaseCancelsDue, limit, clock, lease, cancelLease, nil, pgx.RowToStructByPos[Leased])
	if err != nil {
		return all, fmt.Errorf("dispatch: lease cancel requests: %w", err)
	}
	if limit -= len(all); limit == 0 {
		return all, nil
	}
	leased, err := outbound.Lease(ctx, s.db, leaseDue, limit, clock, lease, dispatchLease,
		pgx.NamedArgs{"kept": KeptAttempts}, pgx.RowToStructByPos[Leased])
	all = append(all, leased...)
	if err != nil {
		return all, fmt.Errorf("dispatch: lease: %w", err)
	}
	return all, nil
}

// Message returns the JSON of Run runID's [Message], the same bytes every
// time, or [ErrNotFound] when org has no such Run.
func (s *Store) Message(ctx context.Context, org, runID uuid.UUID) (_ []byte, err error) {
	defer dberr.Annotate(&err)
	// dispatchMessage's columns in order: the Run (the start key read into
	// IdempotencyKey), then its snapshot's, NULL for a direct Run.
	rows, _ := s.db.Query(ctx, dispatchMessage, org, runID)
	r, err := pgx.CollectOneRow(rows, pgx.RowToStructByPos[struct {
		MessageRun
		Version         *int64
		Brief, Baseline json.RawMessage
		Hash, Actor     *string
		At              *time.Time
	}])
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "dispatch: reading the message")
	}
	run := r.MessageRun
	run.Options, run.Input = nullRaw(run.Options), nullRaw(run.Input)
	run.IdempotencyKey = idempotencyKey(run.IdempotencyKey)
	run.CreatedAt = run.CreatedAt.UTC()
	m := Message{Type: MessageType, Timestamp: run.CreatedAt, Data: MessageData{Run: run, StatusURL: StatusPath(runID)}}
	if run.SnapshotID != nil && r.Version != nil {
		m.Data.Snapshot = &MessageSnapshot{
			ID: *run.SnapshotID, SavedSearchID: *run.SavedSearchID, SavedSearchVersion: *r.Version,
			Brief: r.Brief, Baseline: r.Baseline, ContentHash: *r.Hash, CreatedBy: r.Actor, CreatedAt: r.At.UTC(),
		}
	}
	return json.Marshal(m)
}

// CancelMessage returns the JSON of Run runID's [CancelMessage], the same
// bytes every time, or [ErrNotFound] when org has no such request.
func (s *Store) CancelMessage(ctx context.Context, org, runID uuid.UUID) (_ []byte, err error) {
	defer dberr.Annotate(&err)
	var (
		at     time.Time
		reason *string
	)
	if err := s.db.QueryRow(ctx, cancelMessage, org, runID).Scan(&at, &reason); err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "dispatch: reading the cancel request")
	}
	return json.Marshal(CancelMessage{Type: CancelMessageType, Timestamp: at.UTC(), Data: CancelMessageData{
		Run: CancelMessageRun{ID: runID, OrganizationID: org}, Reason: reason, StatusURL: StatusPath(runID),
	}})
}

// States of a cancel request ([Cancel.State]).
const (
	CancelPending   = "pending"
	CancelDelivered = "delivered"
	CancelFailed    = "failed"
	CancelSkipped   = "skipped"
)

// Cancel is a Run's cancel request as stored.
type Cancel struct {
	RequestedAt time.Time `json:"requested_at"`
	// RequestedBy is the token's sub; nil when unknown.
	RequestedBy *string `json:"requested_by"`
	Reason      *string `json:"reason"`
	// State is one of the Cancel* states; skipped means the Run was
	// cancelled before its dispatch was ever attempted.
	State          string     `json:"state"`
	Attempts       int        `json:"attempts"`
	DeliveredAt    *time.Time `json:"delivered_at"`
	FailedAt       *time.Time `json:"failed_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
}

// GetCancel returns the cancel request of Run runID of org, or
// [ErrNotFound] when nobody cancelled it.
func (s *Store) GetCancel(ctx context.Context, org, runID uuid.UUID) (_ *Cancel, err error) {
	defer dberr.Annotate(&err)
	rows, _ := s.db.Query(ctx, cancelGet, org, runID)
	c, err := pgx.CollectOneRow(rows, pgx.RowToAddrOfStructByPos[Cancel]) // cancelGet's columns are in field order
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "dispatch: get cancel request")
	}
	return c, nil
}

// idempotencyKey strips the namespace from a runs start key.
func idempotencyKey(startKey string) string {
	if _, key, ok := strings.Cut(startKey, ":"); ok {
		return key
	}
	return startKey
}

func nullRaw(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// End is how one attempt ended, for [Store.End].
type End struct {
	// Leased is the attempt [Store.LeasePass] returned; Attempt is its fence.
	Leased
	// Outcome is OutcomeDelivered, OutcomeRetry or OutcomeFailed.
	Outcome Outcome
	// StatusCode is the runtime's HTTP status; 0 when none came.
	StatusCode int
	// Answer is what went wrong or what the runtime answered, cut to
	// MaxAnswerLen characters.
	Answer string
	// RetryIn is the delay before an OutcomeRetry is due again.
	RetryIn time.Duration
}

// End records how an attempt ended and reports whether its fence held:
// false when the dispatch was leased again or is no longer pending, and
// then only the attempt's own record changed.
func (s *Store) End(ctx context.Context, e End) (held bool, err error) {
	defer dberr.Annotate(&err)
	switch e.Outcome {
	case OutcomeDelivered, OutcomeRetry, OutcomeFailed:
	default:
		return false, fmt.Errorf("%w: outcome %q", ErrInvalid, e.Outcome)
	}
	code, answer := outbound.EndArgs(e.StatusCode, e.Answer, MaxAnswerLen)
	clock, err := shardpass.Clock(ctx, s.db, s.clock.Arg())
	if err != nil {
		return false, fmt.Errorf("dispatch: end attempt: read the clock: %w", err)
	}
	args := pgx.StrictNamedArgs{
		"org": e.OrganizationID, "run": e.RunID, "attempt": e.Attempt, "outcome": string(e.Outcome),
		"status_code": code, "answer": answer, "clock": clock,
		"state": StatePending, "next_attempt_at": nil, "dispatched_at": nil, "failed_at": nil, "last_error": answer,
	}
	switch e.Outcome {
	case OutcomeDelivered:
		args["state"], args["dispatched_at"], args["last_error"] = StateDispatched, clock, nil
	case OutcomeRetry:
		args["next_attempt_at"] = clock.Add(max(e.RetryIn, 0).Truncate(time.Microsecond))
	case OutcomeFailed:
		args["state"], args["failed_at"] = StateFailed, clock
	}
	q := dispatchEnd
	if e.Cancel {
		q = cancelEnd
		if e.Outcome == OutcomeDelivered {
			args["state"] = CancelDelivered
		}
		delete(args, "outcome")
		delete(args, "answer")
		delete(args, "clock")
	}
	err = s.db.QueryRow(ctx, q, args).Scan(&held)
	if err != nil {
		return false, fmt.Errorf("dispatch: end attempt: %w", err)
	}
	return held, nil
}

// Dispatch is a Run's dispatch as stored.
type Dispatch struct {
	RunID          uuid.UUID `json:"-"`
	OrganizationID uuid.UUID `json:"-"`
	// State is StatePending, StateDispatched or StateFailed.
	State string `json:"state"`
	// Attempts counts the delivery attempts made, every one.
	Attempts int `json:"attempts"`
	// NextAttemptAt is when a pending dispatch is due; nil otherwise.
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time  `json:"-"`
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	DispatchedAt  *time.Time `json:"dispatched_at"`
	FailedAt      *time.Time `json:"failed_at"`
	// LastStatusCode is the runtime's last HTTP status, nil if none came;
	// LastError is nil once delivered.
	LastStatusCode *int    `json:"last_status_code"`
	LastError      *string `json:"last_error"`
	// Retries counts the operator retries of a failed dispatch.
	Retries int `json:"retries"`
}

func scanDispatch(row pgx.Row) (Dispatch, error) {
	var d Dispatch
	var next time.Time
	err := row.Scan(&d.RunID, &d.OrganizationID, &d.State, &d.Attempts, &next, &d.CreatedAt,
		&d.LastAttemptAt, &d.DispatchedAt, &d.FailedAt, &d.LastStatusCode, &d.LastError, &d.Retries)
	if d.State == StatePending {
		d.NextAttemptAt = &next
	}
	return d, err
}

// Get returns the dispatch of Run runID of org, or [ErrNotFound].
func (s *Store) Get(ctx context.Context, org, runID uuid.UUID) (_ *Dispatch, err error) {
	defer dberr.Annotate(&err)
	d, err := scanDispatch(s.db.QueryRow(ctx, dispatchGet, org, runID))
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "dispatch: get")
	}
	return &d, nil
}

// Attempt is one delivery attempt of a dispatch.
type Attempt struct {
	Attempt   int
	StartedAt time.Time
	// EndedAt is nil while Outcome is OutcomeInFlight.
	EndedAt *time.Time
	Outcome Outcome
	// StatusCode is the runtime's HTTP status; nil when none came.
	StatusCode *int
	Answer     *string
}

// Attempts returns the kept attempts (the newest [KeptAttempts]) of the
// dispatch of Run runID of org, oldest first; none for another
// organization's Run.
func (s *Store) Attempts(ctx context.Context, org, runID uuid.UUID) (_ []Attempt, err error) {
	defer dberr.Annotate(&err)
	rows, err := s.db.Query(ctx, dispatchAttempts, org, runID)
	if err != nil {
		return nil, fmt.Errorf("dispatch: attempts: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Attempt])
}

// Retry is an operator's retry of a failed dispatch.
type Retry struct {
	Actor     string
	Reason    string
	RetriedAt time.Time
	// PreviousStatusCode and PreviousError are the answer that failed it.
	PreviousStatusCode *int
	PreviousError      *string
}

// MaxRetriesListed bounds the retries [Store.Retries] returns.
const MaxRetriesListed = 100

// Retries returns at most [MaxRetriesListed] operator retries of Run
// runID's dispatch, oldest first.
func (s *Store) Retries(ctx context.Context, org, runID uuid.UUID) (_ []Retry, err error) {
	defer dberr.Annotate(&err)
	rows, err := s.db.Query(ctx, dispatchRetries, org, runID, MaxRetriesListed)
	if err != nil {
		return nil, fmt.Errorf("dispatch: retries: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Retry])
}

// ListParams are the inputs of [Store.List].
type ListParams struct {
	// State is StateFailed (newest failure first) or StatePending (first
	// due first).
	State string
	// OrganizationID, when set, filters by organization.
	OrganizationID uuid.UUID
	// Limit is 1 to MaxListLimit.
	Limit int
}

// MaxListLimit bounds a list.
const MaxListLimit = 1000

// List returns failed or pending dispatches, or an error wrapping
// [ErrInvalid] for another state or a limit out of range.
func (s *Store) List(ctx context.Context, p ListParams) (_ []Dispatch, err error) {
	defer dberr.Annotate(&err)
	if p.Limit < 1 || p.Limit > MaxListLimit {
		return nil, fmt.Errorf("%w: limit %d: must be 1 to %d", ErrInvalid, p.Limit, MaxListLimit)
	}
	q := dispatchListFailed
	switch p.State {
	case StateFailed:
	case StatePending:
		q = dispatchListPending
	default:
		return nil, fmt.Errorf("%w: state %q: list failed or pending dispatches", ErrInvalid, p.State)
	}
	rows, _ := s.db.Query(ctx, q, sqlarg.Null(p.OrganizationID), p.Limit)
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Dispatch, error) { return scanDispatch(r) })
	if err != nil {
		return nil, fmt.Errorf("dispatch: list: %w", err)
	}
	return list, nil
}

// RetryParams are the inputs of [Store.Retry].
type RetryParams struct {
	RunID uuid.UUID
	// OrganizationID, when set, must be the Run's organization.
	OrganizationID uuid.UUID
	// Actor (1 to MaxActorBytes bytes) and Reason (1 to MaxReasonLen
	// characters) are recorded.
	Actor, Reason string
}

// Retry makes a failed dispatch due now, records who retried it, why and
// the answer that failed it, and returns the dispatch. It returns an error
// wrapping [ErrNotFailed] (writing nothing) for a dispatch that is not
// failed, [ErrNotFound] when there is none, and an error wrapping
// [ErrInvalid] for a missing actor or reason.
func (s *Store) Retry(ctx context.Context, p RetryParams) (_ *Dispatch, err error) {
	defer dberr.Annotate(&err)
	switch {
	case p.RunID == uuid.Nil:
		return nil, fmt.Errorf("%w: the Run id is required", ErrInvalid)
	case p.Actor == "" || len(p.Actor) > MaxActorBytes || !utf8.ValidString(p.Actor) || strings.ContainsRune(p.Actor, 0):
		return nil, fmt.Errorf("%w: the actor must be 1 to %d bytes of UTF-8 without NUL", ErrInvalid, MaxActorBytes)
	case strings.TrimSpace(p.Reason) == "" || utf8.RuneCountInString(p.Reason) > MaxReasonLen ||
		!utf8.ValidString(p.Reason) || strings.ContainsRune(p.Reason, 0):
		return nil, fmt.Errorf("%w: the reason must be 1 to %d characters of UTF-8 without NUL", ErrInvalid, MaxReasonLen)
	}
	var org uuid.UUID
	err = s.db.QueryRow(ctx, dispatchRetry, pgx.StrictNamedArgs{
		"run": p.RunID, "org": sqlarg.Null(p.OrganizationID), "id": ids.New(), "actor": p.Actor,
		"reason": p.Reason, "now": s.clock.Arg(),
	}).Scan(&org)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("dispatch: retry: %w", err)
	}
	d, ferr := scanDispatch(s.db.QueryRow(ctx, dispatchFind, p.RunID, sqlarg.Null(p.OrganizationID)))
	switch {
	case errors.Is(ferr, pgx.ErrNoRows):
		return nil, ErrNotFound
	case ferr != nil:
		return nil, fmt.Errorf("dispatch: retry: %w", ferr)
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("%w: it is %s", ErrNotFailed, d.State)
	}
	return &d, nil
}

// Stats are the outbox's backlog.
type Stats struct {
	// Pending and Failed count the dispatches in those states.
	Pending, Failed int64
	// OldestPending is the age of the oldest pending dispatch's Run, by
	// the database clock; 0 when none is pending.
	OldestPending time.Duration
}

// Stats reads the backlog from partial indexes, so its cost grows with the
// pending and failed rows, never the dispatched ones.
func (s *Store) Stats(ctx context.Context) (_ Stats, err error) {
	defer dberr.Annotate(&err)
	var st Stats
	var secs float64
	if err := s.db.QueryRow(ctx, dispatchPendingStats, s.clock.Arg()).Scan(&st.Pending, &secs); err != nil {
		return Stats{}, fmt.Errorf("dispatch: stats: %w", err)
	}
	if err := s.db.QueryRow(ctx, dispatchFailedCount).Scan(&st.Failed); err != nil {
		return Stats{}, fmt.Errorf("dispatch: stats: %w", err)
	}
	st.OldestPending = time.Duration(secs * float64(time.Second))
	return st, nil
}
