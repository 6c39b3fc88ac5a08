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

// The errors of this package carry the kinds of package errs, as its
// package doc says of every domain package.
var (
	// ErrNotFound reports a Run that does not exist in the organization.
	ErrNotFound = &errs.Error{Kind: errs.NotFound, Message: "runs: not found", Detail: "no such run in your organization"}
	// ErrKeyReused reports a start key already admitted for a different
	// request hash: the key answers for another request.
	ErrKeyReused = errs.New(errs.KeyReused, "runs: start key reused for a different request")
	// ErrInvalid reports admission input the store or the table refuses.
	ErrInvalid = errs.New(errs.Invalid, "runs: invalid input")
	// ErrInvalidCursor reports a list cursor this package did not write.
	ErrInvalidCursor = keyset.InvalidCursor("runs")
)

// Retention is how long a Run, and so its start key's replay, is kept:
// retain_until is its creation plus Retention.
const Retention = 396 * 24 * time.Hour

// Kinds of Run.
const (
	KindSavedSearch = "saved_search"
	KindCapability  = "capability"
	KindDefinition  = "definition"
)

// Statuses of a Run. A Run is admitted queued; the dispatcher moves it to
// dispatched when the runtime acknowledges its delivery; the runtime
// reports running and then one terminal status. The status only moves
// forward (see [Rank]), and a terminal status is never left.
const (
	StatusQueued     = "queued"
	StatusDispatched = "dispatched"
	StatusRunning    = "running"
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// Rank orders the statuses: queued 0, dispatched 1, running 2, and the
// terminal statuses 3; -1 for an unknown status. A Run's status only moves
// to a higher rank.
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

// Terminal reports whether status is a terminal status: succeeded, failed
// or cancelled.
func Terminal(status string) bool { return Rank(status) == 3 }

// MaxStartKeyLen bounds a start key, in bytes: the longest namespace prefix
// plus the longest Idempotency-Key.
const MaxStartKeyLen = 300

// Start-key namespaces.
const (
	savedSearchPrefix = "saved_search:"
	directPrefix      = "direct:"
)

// SavedSearchStartKey returns the start key of the saved-search start
// idempotencyKey names. Its namespace differs from [DirectStartKey]'s.
func SavedSearchStartKey(idempotencyKey string) string { return savedSearchPrefix + idempotencyKey }

// DirectStartKey returns the start key of the direct (capability or
// definition) start idempotencyKey names.
func DirectStartKey(idempotencyKey string) string { return directPrefix + idempotencyKey }

// Run is an admitted Run. Fields that do not apply to its kind are nil and
// written as null.
type Run struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	// Kind is KindSavedSearch, KindCapability or KindDefinition.
	Kind string `json:"kind"`
	// SavedSearchID and SnapshotID are set for saved-search Runs alone.
	SavedSearchID *uuid.UUID `json:"saved_search_id"`
	SnapshotID    *uuid.UUID `json:"snapshot_id"`
	// Name is the definition or capability name of a direct Run, and the
	// saved search's name at the freeze for a saved-search Run.
	Name   *string `json:"name"`
	Status string  `json:"status"`
	// Options are the normalized start options of a saved-search Run.
	Options json.RawMessage `json:"options"`
	// Input is the canonical input of a direct Run.
	Input       json.RawMessage `json:"input"`
	CreatedAt   time.Time       `json:"created_at"`
	RetainUntil time.Time       `json:"retain_until"`
	// Version is 1 at admission and grows by one with every change of
	// status; UpdatedAt is the time of the last change (CreatedAt before
	// any).
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
	// ResultRef is what the runtime reported a succeeded Run produced; nil
	// otherwise.
	ResultRef *string `json:"result_ref"`
	// Error is what the runtime reported a failed or cancelled Run ended
	// with; nil otherwise.
	Error *RunError `json:"error"`
	// CancelRequestedAt is when a cancel was first asked for
	// ([Store.Cancel]); nil when none was.
	CancelRequestedAt *time.Time `json:"cancel_requested_at"`

	// StartKey, RequestHash and CreatedBy are stored but not part of the
	// Run's JSON.
	StartKey    string  `json:"-"`
	RequestHash string  `json:"-"`
	CreatedBy   *string `json:"-"`
}

// ListItem is a Run as a list shows it: the Run without its input, which
// [Store.Get] has, and with the input's size instead. Every field is
// bounded, so a page of MaxListLimit items is too, whatever the inputs hold.
type ListItem struct {
	ID             uuid.UUID  `json:"id"`
	OrganizationID uuid.UUID  `json:"organization_id"`
	Kind           string     `json:"kind"`
	SavedSearchID  *uuid.UUID `json:"saved_search_id"`
	SnapshotID     *uuid.UUID `json:"snapshot_id"`
	Name           *string    `json:"name"`
	Status         string     `json:"status"`
	// Options are the normalized start options of a saved-search Run.
	Options json.RawMessage `json:"options"`
	// InputBytes is the size of a direct Run's stored input as JSON
	// text; nil for a saved-search Run, which has none.
	InputBytes  *int64    `json:"input_bytes"`
	CreatedAt   time.Time `json:"created_at"`
	RetainUntil time.Time `json:"retain_until"`
	Version     int64     `json:"version"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// RunError is how a failed or cancelled Run ended, as its runtime reported
// it: a machine code and, optionally, words for a person.
type RunError struct {
	// Code is 1 to 100 characters of a-z, 0-9, '_', '.' and '-',
	// starting with a letter or digit.
	Code string `json:"code"`
	// Message is at most 2000 characters; nil when none was reported.
	Message *string `json:"message"`
}

// IdempotencyKey returns the client's Idempotency-Key the Run was started
// with: its start key without the namespace.
func (r *Run) IdempotencyKey() string {
	for _, prefix := range []string{savedSearchPrefix, directPrefix} {
		if strings.HasPrefix(r.StartKey, prefix) {
			return r.StartKey[len(prefix):]
		}
	}
	return r.StartKey
}

// MarshalJSON writes the Run with its actor (created_by: the token's sub,
// null when it had none) and the client's idempotency_key, so the audit
// trail of who started what, and with which key, reads without SQL.
func (r Run) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil) }

// AppendJSON appends the Run's JSON (as MarshalJSON writes it) to b,
// without reflection: every start and replay answers with it. Its error is
// encoding/json's for a stored options or input that is not JSON, or a
// time with no RFC 3339 form.
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
	// Kind is KindSavedSearch, KindCapability or KindDefinition.
	Kind string
	// StartKey is built by SavedSearchStartKey or DirectStartKey.
	StartKey string
	// RequestHash identifies the request; a later Admit with the same
	// StartKey and another hash answers ErrKeyReused.
	RequestHash string
	// SavedSearchID and SnapshotID are required for a saved-search Run
	// and must be nil for a direct one.
	SavedSearchID *uuid.UUID
	SnapshotID    *uuid.UUID
	// Name is required for a direct Run.
	Name *string
	// Options (a JSON object) and Input are stored as given; nil stores
	// NULL. A saved-search Run has no Input.
	Options json.RawMessage
	Input   json.RawMessage
	// Actor is recorded as created_by; empty records NULL.
	Actor string
}

// ListParams are the inputs of [Store.List]. Each filter that is set
// keeps the Runs it matches; zero filters list every Run.
type ListParams struct {
	// SavedSearchID, when set, lists the Runs of that saved search alone.
	SavedSearchID *uuid.UUID
	// Status, when set, keeps the Runs in this status (one of the
	// Status constants).
	Status string
	// IdempotencyKey, when set, keeps the Run started with this
	// Idempotency-Key, on either surface (start keys saved_search:<key>
	// and direct:<key>), as the console's [SearchParams.Key] does.
	IdempotencyKey string
	// CreatedAfter and CreatedBefore, when not zero, keep the Runs created
	// strictly after and strictly before them. They must lie in
	// [keyset.MinInstant, keyset.MaxInstant]; PostgreSQL compares them at
	// microsecond precision.
	CreatedAfter, CreatedBefore time.Time
	// Limit is the page size: 1 to MaxListLimit; zero or less means
	// DefaultListLimit, more means MaxListLimit.
	Limit int
	// Cursor is the next cursor a previous page returned; empty for the
	// first page.
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

// DBTX is what the store needs of a database handle: a *pgxpool.Pool, a
// *pgx.Conn or a pgx.Tx.
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

// NewStore returns a store running its statements on db, usually a
// *pgxpool.Pool. Every Config is valid.
func NewStore(db DBTX, cfg Config) *Store { return &Store{db: db, clock: cfg.Clock} }

// Cursors returns a copy of s whose lists sign and verify their cursors
// with k, the database's cursor key in production; without it they use
// the zero [keyset.Key], whose cursors no other process accepts.
func (s *Store) Cursors(k keyset.Key) *Store {
	c := *s
	c.cursors = k
	return &c
}

// Clock returns the database clock the store runs at, [Config.Clock].
func (s *Store) Clock() *dbclock.Clock { return s.clock }

func (s *Store) nowArg() any { return s.clock.Arg() }

// maxAdmitRounds bounds how often Admit goes round when the Run holding its
// key disappears between the insert and the read (a retention sweep).
const maxAdmitRounds = 3

// Admit admits a Run: it inserts it and reports created true, or, when
// p.StartKey is already admitted in the organization, returns that Run and
// created false. It never touches agent.idempotency_keys: the unique index
// on (organization_id, start_key) is the admission. A Run under the key whose
// retention has passed is absent: it is deleted, as the sweeper would, and a
// new Run admitted in its place.
//
// It returns [ErrKeyReused] when the existing Run was admitted for a
// different request hash, and an error wrapping [ErrInvalid] for params the
// store or the table's checks refuse (a missing field, a saved-search Run
// without its snapshot, a start key outside its kind's namespace). Other
// errors come from the database.
//
// A new Run costs one round trip (its insert and its outbox row's, in a
// transaction of their own unless the store's db is a pgx.Tx), a replay
// two.
func (s *Store) Admit(ctx context.Context, p AdmitParams) (run *Run, created bool, err error) {
	defer dberr.Annotate(&err)
	if err := p.validate(); err != nil {
		return nil, false, err
	}
	for range maxAdmitRounds {
		// The Run and its outbox row commit together, in one round trip.
		var q *QueuedAdmit
		if err := sendInTx(ctx, s.db, func(b *pgx.Batch) { q = s.queueAdmit(b, p) }); err != nil {
			return nil, false, err
		}
		if run, err := q.Run(); err != nil || run != nil {
			return run, run != nil, err
		}
		run, err = s.GetByStartKey(ctx, p.OrganizationID, p.StartKey)
		if errors.Is(err, ErrNotFound) {
			// Deleted since the insert, or past its retention: such a Run
			// is absent, so it goes (as the sweeper would take it) and
			// the start is admitted again.
			if _, err := s.db.Exec(ctx, runDeleteExpiredByStartKey, p.OrganizationID, p.StartKey, s.nowArg()); err != nil {
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

// sendInTx sends the batch queue fills in a transaction: db's own when db
// is a pgx.Tx, else one of the batch's, its BEGIN and COMMIT riding at its
// head and tail, so it still costs one round trip. A pipeline without them
// is one implicit transaction on PostgreSQL, but not on Citus, whose
// coordinator commits a statement on its worker before the next one runs.
// A failed batch rolls the transaction back (a pool then discards the
// connection it left in the aborted transaction).
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

// QueueAdmit queues on b the inserts that begin [Store.Admit] (the Run and
// its outbox row), for a caller that admits the Run in one round trip with
// its own writes and the COMMIT of their transaction: the Run is then
// admitted exactly when those writes are. b must run inside a transaction
// (the caller's BEGIN): the Run and its outbox row commit together only
// there. [QueuedAdmit.Run] answers once b's results are closed. A refused
// insert fails the batch (an error wrapping [ErrInvalid] for a refused
// check), which aborts the transaction.
//
// Invalid params return an error wrapping [ErrInvalid] and queue nothing.
func (s *Store) QueueAdmit(b *pgx.Batch, p AdmitParams) (*QueuedAdmit, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	return s.queueAdmit(b, p), nil
}

// queueAdmit is QueueAdmit of valid params.
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

// Run returns the Run the queued insert admitted. It returns nil and no
// error when the start key was already admitted: [Store.Admit] with the
// same params then answers that Run (or [ErrKeyReused]). It returns an
// error when the batch did not get as far as the insert.
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
		"created_by": sqlarg.Null(p.Actor), "retention_us": Retention.Microseconds(), "now": s.nowArg(),
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

// GetByStartKey returns the Run admitted under startKey in org. It returns
// [ErrNotFound] when there is none, or when its retention has passed by the
// database clock (the sweeper may not have deleted it yet).
func (s *Store) GetByStartKey(ctx context.Context, org uuid.UUID, startKey string) (_ *Run, err error) {
	defer dberr.Annotate(&err)
	run, err := scanRun(s.db.QueryRow(ctx, runGetByStartKey, org, startKey, s.nowArg()))
	if err != nil {
		return nil, translate("get by start key", err)
	}
	return run, nil
}

// LookupStart returns the Run admitted under startKey in org with the
// summary of its snapshot (nil for a direct Run), in one statement: all a
// replayed start answers. It returns [ErrNotFound] when there is none, and
// when the Run's retention has passed by the database clock, whether or not
// the sweeper has deleted it yet: a start key replays for [Retention] and
// not a moment longer.
func (s *Store) LookupStart(ctx context.Context, org uuid.UUID, startKey string) (_ *Run, _ *snapshot.Summary, err error) {
	defer dberr.Annotate(&err)
	// The replay path: every argument and column goes through pgx's
	// binary uuid codec directly. A uuid.UUID argument is encoded through
	// its driver.Valuer (a string that fails the binary encoding, then is
	// parsed back) and a *uuid.UUID column scanned through sql.Scanner;
	// both cost more than the rest of the scan.
	var (
		run                 Run
		searchID, runSnap   pgtype.UUID
		snapID, snapSearch  pgtype.UUID
		version             *int64
		hash                *string
		createdAt           *time.Time
		errCode, errMessage *string
	)
	err = s.db.QueryRow(ctx, runWithSnapshotByStartKey, pgtype.UUID{Bytes: org, Valid: true}, startKey, s.nowArg()).Scan(
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

// Get returns Run id of org. It returns [ErrNotFound] when org has no such
// Run, including another organization's.
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (_ *Run, err error) {
	defer dberr.Annotate(&err)
	run, err := scanRun(s.db.QueryRow(ctx, runGet, org, id))
	if err != nil {
		return nil, translate("get", err)
	}
	return run, nil
}

// List returns a page of org's Runs that match p's filters, as [ListItem]
// values, newest first, and the cursor of the next page ("" after the
// last page). A saved search with no Runs, or another organization's,
// gives an empty page. A cursor is for the filters of the page that
// minted it: with other filters it still names a position in org's Runs,
// and the page starts there. It returns [ErrInvalidCursor] for a cursor
// it did not write, and an error wrapping [ErrInvalid] for an unknown
// status, an over-long key or an instant outside [keyset.MinInstant,
// keyset.MaxInstant], before any SQL runs.
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

// runListQuery returns the statement of a list with p's filters and its
// arguments, args (runList's four) followed by one per filter that is
// set. Only the conditions of the filters set are in the statement, so
// each combination is a statement of its own, whose plan (custom or
// generic) uses the index for it; see runListFilter.
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

// runScan holds what runColumns scan into: the Run, and the columns of
// its error, which [runScan.run] folds into Run.Error.
type runScan struct {
	Run
	errCode, errMessage *string
}

// scanDest returns the destinations of runColumns.
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

// runError is the error of the stored columns; nil when there is none.
func runError(code, message *string) *RunError {
	if code == nil {
		return nil
	}
	return &RunError{Code: *code, Message: message}
}

// translate turns the driver's answer into the package's: no row is
// ErrNotFound, a refused check or foreign key is ErrInvalid.
func translate(op string, err error) error {
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
