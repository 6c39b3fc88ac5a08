package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/jsonenc"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
	"github.com/searchd/searchd/snapshot"
)

// Errors carry the kinds of package errs.
var (
	// ErrNotFound reports a Run that does not exist in the organization.
	ErrNotFound = &errs.Error{Kind: errs.NotFound, Message: "runs: not found", Detail: "no such run in your organization"}
	// ErrKeyReused reports a start key already admitted for another request.
	ErrKeyReused = errs.New(errs.KeyReused, "runs: start key reused for a different request")
	// ErrInvalid reports admission input the store or the table refuses.
	ErrInvalid = errs.New(errs.Invalid, "runs: invalid input")
	// ErrInvalidCursor reports a list cursor this package did not write.
	ErrInvalidCursor = keyset.InvalidCursor("runs")
)

// Retention is how long a Run, and its start key's replay, is kept.
const Retention = 396 * 24 * time.Hour

// Kinds of Run.
const (
	KindSavedSearch = "saved_search"
	KindCapability  = "capability"
	KindDefinition  = "definition"
)

// Statuses of a Run: queued, dispatched (the runtime acknowledged delivery),
// running, then one terminal status. Status only moves forward ([Rank]).
const (
	StatusQueued     = "queued"
	StatusDispatched = "dispatched"
	StatusRunning    = "running"
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// Rank orders the statuses: queued 0, dispatched 1, running 2, terminal 3;
// -1 for an unknown status.
func Rank(status string) int {
	switch status {
	case StatusQueued:
		return 0
	case StatusDispatched:
		return 1
	case StatusRunning:
		return 2
	case StatusSucceeded, StatusFailed, StatusCancelled:
		return 3
	}
	return -1
}

// Terminal reports whether status is succeeded, failed or cancelled.
func Terminal(status string) bool { return Rank(status) == 3 }

// MaxStartKeyLen bounds a start key in bytes: the longest prefix plus the
// longest Idempotency-Key.
const MaxStartKeyLen = 300

// Start-key namespaces.
const (
	savedSearchPrefix = "saved_search:"
	directPrefix      = "direct:"
)

// SavedSearchStartKey returns the start key of a saved-search start.
func SavedSearchStartKey(idempotencyKey string) string { return savedSearchPrefix + idempotencyKey }

// DirectStartKey returns the start key of a direct start.
func DirectStartKey(idempotencyKey string) string { return directPrefix + idempotencyKey }

// Run is an admitted Run. Fields that do not apply to its kind are nil.
type Run struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	Kind           string    `json:"kind"`
	// SavedSearchID and SnapshotID are set for saved-search Runs only.
	SavedSearchID *uuid.UUID `json:"saved_search_id"`
	SnapshotID    *uuid.UUID `json:"snapshot_id"`
	// Name is a direct Run's definition or capability name, or the saved
	// search's name when frozen.
	Name   *string `json:"name"`
	Status string  `json:"status"`
	// Options are a saved-search Run's normalized start options.
	Options     json.RawMessage `json:"options"`
	Input       json.RawMessage `json:"input"`
	CreatedAt   time.Time       `json:"created_at"`
	RetainUntil time.Time       `json:"retain_until"`
	// Version is 1 at admission and grows with every status change.
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
	ResultRef *string   `json:"result_ref"`
	Error     *RunError `json:"error"`
	// CancelRequestedAt is when a cancel was first asked for.
	CancelRequestedAt *time.Time `json:"cancel_requested_at"`

	// StartKey, RequestHash and CreatedBy are not in the Run's JSON.
	StartKey    string  `json:"-"`
	RequestHash string  `json:"-"`
	CreatedBy   *string `json:"-"`
}

// ListItem is a Run with its input's size instead of its input.
type ListItem struct {
	ID             uuid.UUID       `json:"id"`
	OrganizationID uuid.UUID       `json:"organization_id"`
	Kind           string          `json:"kind"`
	SavedSearchID  *uuid.UUID      `json:"saved_search_id"`
	SnapshotID     *uuid.UUID      `json:"snapshot_id"`
	Name           *string         `json:"name"`
	Status         string          `json:"status"`
	Options        json.RawMessage `json:"options"`
	// InputBytes is a direct Run's input size as JSON text.
	InputBytes  *int64    `json:"input_bytes"`
	CreatedAt   time.Time `json:"created_at"`
	RetainUntil time.Time `json:"retain_until"`
	Version     int64     `json:"version"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// RunError is how a failed or cancelled Run ended, as its runtime reported.
type RunError struct {
	// Code is 1 to 100 of a-z, 0-9, '_', '.' and '-', starting alphanumeric.
	Code string `json:"code"`
	// Message is at most 2000 characters; nil if none.
	Message *string `json:"message"`
}

// IdempotencyKey returns the start key without its namespace.
func (r *Run) IdempotencyKey() string {
	for _, prefix := range []string{savedSearchPrefix, directPrefix} {
		if strings.HasPrefix(r.StartKey, prefix) {
			return r.StartKey[len(prefix):]
		}
	}
	return r.StartKey
}

// MarshalJSON writes the Run with created_by and idempotency_key, so the
// audit trail reads without SQL.
func (r Run) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil) }

// AppendJSON appends the Run's JSON to b without reflection. It fails for
// stored options or input that is not JSON, or a time with no RFC 3339 form.
func (r Run) AppendJSON(b []byte) (_ []byte, err error) {
	b = append(b, `{"id":`...)
	b = jsonenc.UUID(b, r.ID)
	b = append(b, `,"organization_id":`...)
	b = jsonenc.UUID(b, r.OrganizationID)
	b = append(b, `,"kind":`...)
	b = jsonenc.String(b, r.Kind)
	b = append(b, `,"saved_search_id":`...)
	b = jsonenc.NullUUID(b, r.SavedSearchID)
	b = append(b, `,"snapshot_id":`...)
	b = jsonenc.NullUUID(b, r.SnapshotID)
	b = append(b, `,"name":`...)
	b = jsonenc.NullString(b, r.Name)
	b = append(b, `,"status":`...)
	b = jsonenc.String(b, r.Status)
	b = append(b, `,"options":`...)
	if b, err = jsonenc.Raw(b, r.Options); err != nil {
		return nil, err
	}
	b = append(b, `,"input":`...)
	if b, err = jsonenc.Raw(b, r.Input); err != nil {
		return nil, err
	}
	b = append(b, `,"created_at":`...)
	if b, err = jsonenc.Time(b, r.CreatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"retain_until":`...)
	if b, err = jsonenc.Time(b, r.RetainUntil); err != nil {
		return nil, err
	}
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, r.Version, 10)
	b = append(b, `,"updated_at":`...)
	if b, err = jsonenc.Time(b, r.UpdatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"result_ref":`...)
	b = jsonenc.NullString(b, r.ResultRef)
	b = append(b, `,"error":`...)
	if r.Error == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"code":`...)
		b = jsonenc.String(b, r.Error.Code)
		b = append(b, `,"message":`...)
		b = jsonenc.NullString(b, r.Error.Message)
		b = append(b, '}')
	}
	b = append(b, `,"cancel_requested_at":`...)
	if r.CancelRequestedAt == nil {
		b = append(b, "null"...)
	} else if b, err = jsonenc.Time(b, *r.CancelRequestedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"created_by":`...)
	b = jsonenc.NullString(b, r.CreatedBy)
	b = append(b, `,"idempotency_key":`...)
	b = jsonenc.String(b, r.IdempotencyKey())
	return append(b, '}'), nil
}

// AdmitParams are the inputs of [Store.Admit].
type AdmitParams struct {
	OrganizationID uuid.UUID
	Kind           string
	StartKey       string
	// RequestHash identifies the request; another hash under the same
	// StartKey answers ErrKeyReused.
	RequestHash string
	// SavedSearchID and SnapshotID are required for a saved-search Run only.
	SavedSearchID *uuid.UUID
	SnapshotID    *uuid.UUID
	// Name is required for a direct Run.
	Name *string
	// Options (a JSON object) and Input are stored as given; nil is NULL.
	Options json.RawMessage
	Input   json.RawMessage
	// Actor is recorded as created_by; empty records NULL.
	Actor string
}

// ListParams are the inputs of [Store.List]; zero filters list every Run.
type ListParams struct {
	SavedSearchID *uuid.UUID
	Status        string
	// IdempotencyKey matches either start-key namespace.
	IdempotencyKey string
	// CreatedAfter and CreatedBefore bound created_at exclusively, within
	// [keyset.MinInstant, keyset.MaxInstant].
	CreatedAfter, CreatedBefore time.Time
	// Limit is capped at MaxListLimit; zero or less means DefaultListLimit.
	Limit int
	// Cursor is the previous page's next cursor; empty for the first.
	Cursor string
}

// Page sizes of [Store.List].
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// Config configures a [Store].
type Config struct {
	// Clock is the database clock that stamps created_at and retain_until
	// and judges retention. Nil (the default) passes NULL, so every replica
	// uses the database's now(); tests hand in the stub the rest of their
	// components run at.
	Clock *dbclock.Clock
}

// DBTX is a *pgxpool.Pool, *pgx.Conn or pgx.Tx.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Store admits and reads Runs. It is safe for concurrent use.
type Store struct {
	db      DBTX
	clock   *dbclock.Clock
	cursors keyset.Key
}

// NewStore returns a store on db.
func NewStore(db DBTX, cfg Config) *Store { return &Store{db: db, clock: cfg.Clock} }

// Cursors returns a copy of s that signs its cursors with k; the default
// zero key is accepted by no other process.
func (s *Store) Cursors(k keyset.Key) *Store {
	c := *s
	c.cursors = k
	return &c
}

// Clock returns the database clock the store runs at.
func (s *Store) Clock() *dbclock.Clock { return s.clock }

// maxAdmitRounds bounds Admit's retries when the key's Run vanishes between
// insert and read.
const maxAdmitRounds = 3

// Admit inserts a Run and reports created, or returns the Run already
// admitted under p.StartKey; one past its retention is replaced. Errors:
// [ErrKeyReused] for a different request hash, [ErrInvalid] for params the
// store or the table refuses.
func (s *Store) Admit(ctx context.Context, p AdmitParams) (run *Run, created bool, err error) {
	defer dberr.Annotate(&err)
	if err := p.validate(); err != nil {
		return nil, false, err
	}
	for range maxAdmitRounds {
		var q *QueuedAdmit
		if err := sendInTx(ctx, s.db, func(b *pgx.Batch) { q = s.queueAdmit(b, p) }); err != nil {
			return nil, false, err
		}
		if run, err := q.Run(); err != nil || run != nil {
			return run, run != nil, err
		}
		run, err = s.GetByStartKey(ctx, p.OrganizationID, p.StartKey)
		if errors.Is(err, ErrNotFound) {
			if _, err := s.db.Exec(ctx, runDeleteExpiredByStartKey, p.OrganizationID, p.StartKey, s.clock.Arg()); err != nil {
				return nil, false, translate("admit: delete expired", err)
			}
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if run.RequestHash != p.RequestHash {
			return nil, false, ErrKeyReused
		}
		return run, false, nil
	}
	return nil, false, fmt.Errorf("runs: admit: the Run under start key %q kept disappearing", p.StartKey)
}

// sendInTx sends queue's batch in db's transaction, or between BEGIN and
// COMMIT in the batch: Citus commits each statement of an implicit pipeline
// transaction on its own.
func sendInTx(ctx context.Context, db DBTX, queue func(b *pgx.Batch)) error {
	b := &pgx.Batch{}
	_, inTx := db.(pgx.Tx)
	if !inTx {
		b.Queue("begin")
	}
	queue(b)
	if !inTx {
		b.Queue("commit")
	}
	return db.SendBatch(ctx, b).Close()
}

// QueuedAdmit is a Run insert queued on a batch by [Store.QueueAdmit].
type QueuedAdmit struct {
	run  *Run
	done bool
}

// QueueAdmit queues [Store.Admit]'s inserts on b, which must run in the
// caller's transaction. A refused insert aborts it. Invalid params return an
// error wrapping [ErrInvalid] and queue nothing.
func (s *Store) QueueAdmit(b *pgx.Batch, p AdmitParams) (*QueuedAdmit, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	return s.queueAdmit(b, p), nil
}

func (s *Store) queueAdmit(b *pgx.Batch, p AdmitParams) *QueuedAdmit {
	q := &QueuedAdmit{}
	args := s.insertArgs(p)
	b.Queue(runInsert, args).QueryRow(func(row pgx.Row) error {
		q.done = true
		run, err := scanRun(row)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil // the start key is taken: Run answers nil
		case err != nil:
			return translate("admit", err)
		}
		q.run = run
		return nil
	})
	b.Queue(dispatchInsert, pgx.StrictNamedArgs{"org": args["org"], "id": args["id"]})
	b.Queue(eventInsert, pgx.StrictNamedArgs{"org": args["org"], "id": args["id"]})
	return q
}

// Run returns the admitted Run after b's results are closed; nil, nil when
// the start key was taken; an error when the batch failed first.
func (q *QueuedAdmit) Run() (*Run, error) {
	if !q.done {
		return nil, errors.New("runs: the queued admission has not run")
	}
	return q.run, nil
}

func (s *Store) insertArgs(p AdmitParams) pgx.StrictNamedArgs {
	return pgx.StrictNamedArgs{
		"id": ids.New(), "org": p.OrganizationID, "kind": p.Kind, "start_key": p.StartKey,
		"request_hash": p.RequestHash, "saved_search_id": p.SavedSearchID, "snapshot_id": p.SnapshotID,
		"name": p.Name, "options": sqlarg.JSON(p.Options), "input": sqlarg.JSON(p.Input),
		"created_by": sqlarg.Null(p.Actor), "retention_us": Retention.Microseconds(), "now": s.clock.Arg(),
	}
}

func (p AdmitParams) validate() error {
	invalid := func(reason string) error { return fmt.Errorf("%w: %s", ErrInvalid, reason) }
	switch {
	case p.OrganizationID == uuid.Nil:
		return invalid("organization id is the nil UUID")
	case p.Kind != KindSavedSearch && p.Kind != KindCapability && p.Kind != KindDefinition:
		return invalid(fmt.Sprintf("unknown kind %q", p.Kind))
	case p.StartKey == "" || len(p.StartKey) > MaxStartKeyLen:
		return invalid("start key must be 1 to 300 bytes")
	case p.RequestHash == "":
		return invalid("request hash is empty")
	case len(p.Options) > 0 && !json.Valid(p.Options):
		return invalid("options are not valid JSON")
	case len(p.Input) > 0 && !json.Valid(p.Input):
		return invalid("input is not valid JSON")
	}
	return nil
}

// GetByStartKey returns the Run under startKey in org, or [ErrNotFound] when
// there is none or it is past retention.
func (s *Store) GetByStartKey(ctx context.Context, org uuid.UUID, startKey string) (_ *Run, err error) {
	defer dberr.Annotate(&err)
	run, err := scanRun(s.db.QueryRow(ctx, runGetByStartKey, org, startKey, s.clock.Arg()))
	return run, translate("get by start key", err)
}

// LookupStart is [Store.GetByStartKey] with the snapshot summary (nil for a
// direct Run), in one statement.
func (s *Store) LookupStart(ctx context.Context, org uuid.UUID, startKey string) (_ *Run, _ *snapshot.Summary, err error) {
	defer dberr.Annotate(&err)
	// Hot path: pgx's binary UUID codec, not uuid.UUID's Valuer and Scanner.
	var (
		run                 Run
		searchID, runSnap   pgtype.UUID
		snapID, snapSearch  pgtype.UUID
		version             *int64
		hash                *string
		createdAt           *time.Time
		errCode, errMessage *string
	)
	err = s.db.QueryRow(ctx, runWithSnapshotByStartKey, pgtype.UUID{Bytes: org, Valid: true}, startKey, s.clock.Arg()).Scan(
		(*[16]byte)(&run.ID), (*[16]byte)(&run.OrganizationID), &run.Kind, &run.StartKey, &run.RequestHash,
		&searchID, &runSnap, &run.Name, &run.Status, &run.Options, &run.Input,
		&run.CreatedBy, &run.CreatedAt, &run.RetainUntil,
		&run.Version, &run.UpdatedAt, &run.ResultRef, &errCode, &errMessage, &run.CancelRequestedAt,
		&snapID, &snapSearch, &version, &hash, &createdAt)
	if err != nil {
		return nil, nil, translate("lookup start", err)
	}
	run.Error = runError(errCode, errMessage)
	if searchID.Valid {
		run.SavedSearchID = (*uuid.UUID)(&searchID.Bytes)
	}
	if runSnap.Valid {
		run.SnapshotID = (*uuid.UUID)(&runSnap.Bytes)
	}
	if !snapID.Valid {
		return &run, nil, nil
	}
	return &run, &snapshot.Summary{
		ID:                 snapID.Bytes,
		SavedSearchID:      snapSearch.Bytes,
		SavedSearchVersion: *version,
		ContentHash:        *hash,
		CreatedAt:          *createdAt,
	}, nil
}

// Get returns Run id of org, or [ErrNotFound].
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (_ *Run, err error) {
	defer dberr.Annotate(&err)
	run, err := scanRun(s.db.QueryRow(ctx, runGet, org, id))
	return run, translate("get", err)
}

// List returns a page of org's Runs matching p, newest first, and the next
// cursor ("" after the last). It returns [ErrInvalidCursor], or before any
// SQL an error wrapping [ErrInvalid] for a bad status, key or instant.
func (s *Store) List(ctx context.Context, org uuid.UUID, p ListParams) (_ []ListItem, _ string, err error) {
	defer dberr.Annotate(&err)
	if err := p.validate(); err != nil {
		return nil, "", err
	}
	q, err := s.cursors.Read(keyset.List{Name: "runs.list", Org: org}, p.Cursor, p.Limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	query, args := runListQuery(p, []any{org, q.At, q.ID, q.Limit + 1})
	return keyset.Query(ctx, s.db, "runs: list", q, pgx.RowToStructByPos[ListItem], ListItem.position, query, args...)
}

// runListQuery returns the list statement for p's filters, one per
// combination so each plan uses its index, and its arguments.
func runListQuery(p ListParams, args []any) (string, []any) {
	head := runListHead
	if p.IdempotencyKey != "" {
		head, args = runListKeyHead, append(args, p.IdempotencyKey)
	}
	var where strings.Builder
	add := func(cond string, arg any) {
		args = append(args, arg)
		fmt.Fprintf(&where, "\n\tAND "+cond, len(args))
	}
	if p.SavedSearchID != nil {
		add(runListFilter.savedSearch, *p.SavedSearchID)
	}
	if p.Status != "" {
		add(runListFilter.status, p.Status)
	}
	if !p.CreatedAfter.IsZero() {
		add(runListFilter.after, p.CreatedAfter)
	}
	if !p.CreatedBefore.IsZero() {
		add(runListFilter.before, p.CreatedBefore)
	}
	return head + where.String() + runListTail, args
}

func (p ListParams) validate() error {
	invalid := func(reason string) error { return fmt.Errorf("%w: %s", ErrInvalid, reason) }
	inRange := func(t time.Time) bool {
		return t.IsZero() || !t.Before(keyset.MinInstant) && !t.After(keyset.MaxInstant)
	}
	switch {
	case p.Status != "" && Rank(p.Status) < 0:
		return invalid(fmt.Sprintf("unknown status %q", p.Status))
	case len(p.IdempotencyKey)+len(savedSearchPrefix) > MaxStartKeyLen:
		return invalid("idempotency key too long")
	case !inRange(p.CreatedAfter) || !inRange(p.CreatedBefore):
		return invalid("created_after or created_before outside the years 1 to 9999")
	}
	return nil
}

func (r Run) position() keyset.Position { return keyset.Position{CreatedAt: r.CreatedAt, ID: r.ID} }

func (it ListItem) position() keyset.Position {
	return keyset.Position{CreatedAt: it.CreatedAt, ID: it.ID}
}

type runScan struct {
	Run
	errCode, errMessage *string
}

func (r *runScan) scanDest() []any {
	return []any{&r.ID, &r.OrganizationID, &r.Kind, &r.StartKey, &r.RequestHash,
		&r.SavedSearchID, &r.SnapshotID, &r.Name, &r.Status, &r.Options, &r.Input,
		&r.CreatedBy, &r.CreatedAt, &r.RetainUntil,
		&r.Version, &r.UpdatedAt, &r.ResultRef, &r.errCode, &r.errMessage, &r.CancelRequestedAt}
}

func (r *runScan) run() *Run {
	run := r.Run
	run.Error = runError(r.errCode, r.errMessage)
	return &run
}

func scanRun(row pgx.Row) (*Run, error) {
	var r runScan
	if err := row.Scan(r.scanDest()...); err != nil {
		return nil, err
	}
	return r.run(), nil
}

func runError(code, message *string) *RunError {
	if code == nil {
		return nil
	}
	return &RunError{Code: *code, Message: message}
}

// translate maps no row to ErrNotFound and a refused check or foreign key to
// ErrInvalid; nil stays nil.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23514", "23503", "23502", "22P02": // check, foreign key, not null, bad text
			return fmt.Errorf("%w: %s: %s", ErrInvalid, pgErr.ConstraintName, pgErr.Message)
		}
	}
	return fmt.Errorf("runs: %s: %w", op, err)
}
