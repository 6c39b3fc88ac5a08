package savedsearch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
)

// Errors carry the kinds of package errs.
var (
	// ErrNotFound reports a saved search that does not exist, is another
	// organization's, or is archived.
	ErrNotFound = &errs.Error{Kind: errs.NotFound, Message: "savedsearch: not found", Detail: "no such saved search in your organization"}
	// ErrInvalid is wrapped, with validator.ValidationErrors, by every input
	// error, returned before any SQL.
	ErrInvalid = errs.New(errs.Invalid, "savedsearch: invalid input")
	// ErrInvalidCursor reports a list cursor this package did not write.
	ErrInvalidCursor = keyset.InvalidCursor("savedsearch")
)

const maxQueryLenSQL = "2000"

// Limits of a saved search, as the validate tags state them.
const (
	MaxNameLen      = 200
	MaxQueryLen     = 2000
	MaxItemLen      = 200
	MaxBaselineSize = 10000
)

// Brief is what a saved search looks for.
type Brief struct {
	// Query is 1 to 2000 characters.
	Query   string         `json:"query" validate:"required,max=2000"`
	Filters map[string]any `json:"filters,omitempty"`
}

// UnmarshalJSON keeps Filters' numbers as json.Number, so large integers
// round-trip exactly.
func (b *Brief) UnmarshalJSON(data []byte) error {
	type plain Brief
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*b = Brief(p)
	return nil
}

// Baseline is the results a saved search has already seen.
type Baseline struct {
	// Items holds at most 10000 strings of 1 to 200 characters; never null.
	Items []string `json:"items" validate:"max=10000,dive,required,max=200"`
	// Cursor is where the last search stopped; nil if it has not run.
	Cursor *string `json:"cursor"`
}

// MarshalJSON writes empty Items as [].
func (b Baseline) MarshalJSON() ([]byte, error) {
	type plain Baseline
	if b.Items == nil {
		b.Items = []string{}
	}
	return json.Marshal(plain(b))
}

// SavedSearch is a live saved search with its baseline.
type SavedSearch struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	Name           string    `json:"name"`
	Brief          Brief     `json:"brief"`
	Baseline       Baseline  `json:"baseline"`
	// Version starts at 1 and grows with every change.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// ArchivedAt is nil while live; only [Store.GetAny] and the archived list read it.
	ArchivedAt *time.Time `json:"archived_at"`
}

// Summary is a saved search in a list, without filters or baseline.
type Summary struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	Name           string    `json:"name"`
	// Query is at most MaxQueryLen characters.
	Query     string    `json:"query"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// BriefBytes is the stored brief's size as JSON text.
	BriefBytes    int64 `json:"brief_bytes"`
	BaselineItems int64 `json:"baseline_items"`
	// ArchivedAt is set in the archived list only.
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
}

func (s Summary) position() keyset.Position { return keyset.Position{CreatedAt: s.CreatedAt, ID: s.ID} }

// CreateParams are the inputs of [Store.Create].
type CreateParams struct {
	// Name is 1 to 200 characters.
	Name     string   `json:"name" validate:"required,max=200"`
	Brief    Brief    `json:"brief"`
	Baseline Baseline `json:"baseline"`
	// Actor is recorded as created_by; empty records NULL.
	Actor string `json:"-"`
}

// Validate returns nil, an error wrapping [ErrInvalid] and the
// validator.ValidationErrors, or a [*LimitError] for input over a limit.
func (p CreateParams) Validate() error {
	if err := check(p); err != nil {
		return err
	}
	return limitError(append(checkBriefLimits(&p.Brief, "brief"), checkBaselineLimits(&p.Baseline, "baseline")...))
}

// UpdateParams are the inputs of [Store.Update]; a nil field is kept.
type UpdateParams struct {
	// Name, when set, is 1 to 200 characters.
	Name  *string `json:"name" validate:"omitnil,min=1,max=200"`
	Brief *Brief  `json:"brief"`
	// IfMatch is called with the stored version under the row lock; false
	// changes nothing and returns a [*VersionMismatchError].
	IfMatch func(version int64) bool `json:"-"`
}

// Validate returns nil, an error wrapping [ErrInvalid], or a [*LimitError].
func (p UpdateParams) Validate() error {
	if err := check(p); err != nil {
		return err
	}
	if p.Brief == nil {
		return nil
	}
	return limitError(checkBriefLimits(p.Brief, "brief"))
}

// Validate returns nil, an error wrapping [ErrInvalid], or a [*LimitError].
func (b Baseline) Validate() error {
	if err := check(b); err != nil {
		return err
	}
	return limitError(checkBaselineLimits(&b, ""))
}

// ListParams are the inputs of [Store.List].
type ListParams struct {
	// Limit is capped at MaxListLimit; zero or less means DefaultListLimit.
	Limit int
	// Cursor is the previous page's next cursor; empty for the first.
	Cursor   string
	Archived bool
}

// Page sizes of [Store.List].
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

var validate = validator.New(validator.WithRequiredStructEnabled())

func check(v any) error {
	if err := validate.Struct(v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// DBTX is a *pgxpool.Pool or a pgx.Tx.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store reads and writes saved searches. It is safe for concurrent use.
type Store struct {
	db      *pgxpool.Pool
	cursors keyset.Key
}

// NewStore returns a store on db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

// Cursors returns a copy of s that signs its cursors with k; the default
// zero key is accepted by no other process.
func (s *Store) Cursors(k keyset.Key) *Store {
	c := *s
	c.cursors = k
	return &c
}

// Create stores a new saved search at version 1, or returns an error
// wrapping [ErrInvalid].
func (s *Store) Create(ctx context.Context, org uuid.UUID, p CreateParams) (ss *SavedSearch, err error) {
	defer dberr.Annotate(&err)
	if err := p.Validate(); err != nil {
		return nil, err
	}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		ss, err = s.CreateIn(ctx, tx, org, p)
		return err
	})
	return ss, err
}

// CreateIn is [Store.Create] in tx, in one round trip.
func (s *Store) CreateIn(ctx context.Context, tx pgx.Tx, org uuid.UUID, p CreateParams) (_ *SavedSearch, err error) {
	defer dberr.Annotate(&err)
	if err := p.Validate(); err != nil {
		return nil, err
	}
	brief, err := json.Marshal(p.Brief)
	if err != nil {
		return nil, fmt.Errorf("%w: brief: %w", ErrInvalid, err)
	}
	args := pgx.StrictNamedArgs{
		"id": ids.New(), "org": org, "name": p.Name, "brief": string(brief),
		"created_by": sqlarg.Null(p.Actor),
	}
	var ss SavedSearch
	b := &pgx.Batch{}
	b.Queue(savedSearchInsert, args).QueryRow(func(row pgx.Row) error {
		return row.Scan(&ss.ID, &ss.OrganizationID, &ss.Name, &ss.Brief, &ss.Version, &ss.CreatedAt, &ss.UpdatedAt)
	})
	b.Queue(baselineInsert, pgx.StrictNamedArgs{
		"id": args["id"], "org": org, "items": items(p.Baseline.Items), "cursor": p.Baseline.Cursor,
	}).QueryRow(func(row pgx.Row) error {
		return row.Scan(&ss.Baseline.Items, &ss.Baseline.Cursor)
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("savedsearch: create: %w", err)
	}
	ss.Baseline.Items = items(ss.Baseline.Items)
	return &ss, nil
}

// Get returns org's live saved search id, or [ErrNotFound].
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (_ *SavedSearch, err error) {
	defer dberr.Annotate(&err)
	ss, err := scanSavedSearch(s.db.QueryRow(ctx, savedSearchGet, org, id), false)
	return ss, wrap("get", err)
}

// List returns a page of org's live saved searches, newest first, and the
// next cursor ("" after the last), or [ErrInvalidCursor].
func (s *Store) List(ctx context.Context, org uuid.UUID, p ListParams) (_ []Summary, _ string, err error) {
	defer dberr.Annotate(&err)
	q, err := s.cursors.Read(keyset.List{Name: "savedsearch.list", Org: org}, p.Cursor, p.Limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	query := savedSearchList
	if p.Archived {
		query = savedSearchListArchived
	}
	return keyset.Query(ctx, s.db, "savedsearch: list", q, func(r pgx.CollectableRow) (Summary, error) {
		var it Summary
		var query *string
		err := r.Scan(&it.ID, &it.OrganizationID, &it.Name, &query, &it.Version,
			&it.CreatedAt, &it.UpdatedAt, &it.BriefBytes, &it.BaselineItems, &it.ArchivedAt)
		if query != nil {
			it.Query = *query
		}
		return it, err
	}, Summary.position, query, org, q.At, q.ID, q.Limit+1)
}

// Update changes the name and/or brief of a live saved search and returns
// it; the version moves only on a change. Errors: [ErrInvalid], [ErrNotFound].
func (s *Store) Update(ctx context.Context, org, id uuid.UUID, p UpdateParams) (_ *SavedSearch, err error) {
	defer dberr.Annotate(&err)
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Name == nil && p.Brief == nil {
		return s.Get(ctx, org, id)
	}
	var ss *SavedSearch
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := checkVersion(ctx, tx, org, id, p.IfMatch); err != nil {
			return err
		}
		var err error
		ss, err = update(ctx, tx, org, id, p)
		return err
	})
	if err != nil {
		return nil, wrap("update", err)
	}
	return ss, nil
}

// UpdateFunc is [Store.Update] with parameters change computes from the
// stored saved search (their IfMatch ignored). Read, ifMatch, change and
// write run in one transaction under the row lock, so concurrent calls
// serialize and no version is overwritten unread; change must only compute.
// It returns [ErrNotFound], [*VersionMismatchError], change's error, or
// Update's errors; on any error nothing is written.
func (s *Store) UpdateFunc(ctx context.Context, org, id uuid.UUID, ifMatch func(version int64) bool,
	change func(cur *SavedSearch) (UpdateParams, error)) (_ *SavedSearch, err error) {
	defer dberr.Annotate(&err)
	var ss *SavedSearch
	var refused error // change's error, or its answer's, returned as it is
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		cur, err := scanSavedSearch(tx.QueryRow(ctx, savedSearchLockGet, org, id), false)
		if err != nil {
			return err
		}
		if ifMatch != nil && !ifMatch(cur.Version) {
			return &VersionMismatchError{Current: cur.Version}
		}
		p, err := change(cur)
		if err == nil {
			err = p.Validate()
		}
		if err != nil {
			refused = err
			return err
		}
		if p.Name == nil && p.Brief == nil {
			ss = cur
			return nil
		}
		ss, err = update(ctx, tx, org, id, p)
		return err
	})
	switch {
	case refused != nil:
		return nil, refused
	case err != nil:
		return nil, wrap("update", err)
	}
	return ss, nil
}

// update sets p's name and/or brief in tx, or returns ErrNotFound.
func update(ctx context.Context, tx DBTX, org, id uuid.UUID, p UpdateParams) (*SavedSearch, error) {
	var brief any
	if p.Brief != nil {
		b, err := json.Marshal(p.Brief)
		if err != nil {
			return nil, fmt.Errorf("%w: brief: %w", ErrInvalid, err)
		}
		brief = string(b)
	}
	ss, err := updateSavedSearch(ctx, tx, org, id, p.Name, brief)
	if err != nil {
		return nil, err
	}
	if err := tx.QueryRow(ctx, baselineGet, org, id).Scan(&ss.Baseline.Items, &ss.Baseline.Cursor); err != nil {
		return nil, err
	}
	ss.Baseline.Items = items(ss.Baseline.Items)
	return ss, nil
}

// ReplaceBaseline replaces the baseline of a live saved search and returns
// it; an equal baseline changes nothing. Errors: [ErrInvalid], [ErrNotFound].
func (s *Store) ReplaceBaseline(ctx context.Context, org, id uuid.UUID, b Baseline) (*SavedSearch, error) {
	return s.ReplaceBaselineIf(ctx, org, id, b, nil)
}

// ReplaceBaselineIf is [Store.ReplaceBaseline] with the precondition ifMatch
// ([UpdateParams.IfMatch]); nil is none.
func (s *Store) ReplaceBaselineIf(ctx context.Context, org, id uuid.UUID, b Baseline, ifMatch func(version int64) bool) (_ *SavedSearch, err error) {
	defer dberr.Annotate(&err)
	if err := b.Validate(); err != nil {
		return nil, err
	}
	var ss *SavedSearch
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := checkVersion(ctx, tx, org, id, ifMatch); err != nil {
			return err
		}
		var err error
		// Lock first: this orders every writer.
		if ss, err = updateSavedSearch(ctx, tx, org, id, nil, nil); err != nil {
			return err
		}
		err = tx.QueryRow(ctx, baselineReplace, org, id, items(b.Items), b.Cursor).
			Scan(&ss.Baseline.Items, &ss.Baseline.Cursor, &ss.Version, &ss.UpdatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			ss.Baseline = Baseline{Items: b.Items, Cursor: b.Cursor}
			return nil
		}
		return err
	})
	if err != nil {
		return nil, wrap("replace baseline", err)
	}
	ss.Baseline.Items = items(ss.Baseline.Items)
	return ss, nil
}

// Archive archives a live saved search; its snapshots and Runs stay
// readable. A second archive answers [ErrNotFound].
func (s *Store) Archive(ctx context.Context, org, id uuid.UUID) error {
	return s.ArchiveIf(ctx, org, id, nil)
}

// ArchiveIf is [Store.Archive] with the precondition ifMatch; nil is none.
func (s *Store) ArchiveIf(ctx context.Context, org, id uuid.UUID, ifMatch func(version int64) bool) (err error) {
	defer dberr.Annotate(&err)
	if ifMatch != nil {
		return wrap("archive", pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
			if err := checkVersion(ctx, tx, org, id, ifMatch); err != nil {
				return err
			}
			return archive(ctx, tx, org, id)
		}))
	}
	return archive(ctx, s.db, org, id)
}

func archive(ctx context.Context, db DBTX, org, id uuid.UUID) error {
	tag, err := db.Exec(ctx, savedSearchArchive, org, id)
	if err != nil {
		return fmt.Errorf("savedsearch: archive: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// Exists reports whether org has a live saved search id.
func (s *Store) Exists(ctx context.Context, org, id uuid.UUID) (_ bool, err error) {
	defer dberr.Annotate(&err)
	var ok bool
	if err := s.db.QueryRow(ctx, savedSearchExists, org, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("savedsearch: exists: %w", err)
	}
	return ok, nil
}

// GetAny returns org's saved search id, live or archived, or [ErrNotFound].
func (s *Store) GetAny(ctx context.Context, org, id uuid.UUID) (_ *SavedSearch, err error) {
	defer dberr.Annotate(&err)
	ss, err := scanSavedSearch(s.db.QueryRow(ctx, savedSearchGetAny, org, id), true)
	return ss, wrap("get", err)
}

// ErrVersionMismatch is wrapped by every [*VersionMismatchError].
var ErrVersionMismatch = &errs.Error{Kind: errs.PreconditionFailed, Message: "savedsearch: version precondition failed",
	Detail: "the saved search changed since the version If-Match names; read it again (its ETag) and reapply the change"}

// VersionMismatchError reports a change refused by its version
// precondition (If-Match). Current is the stored version.
type VersionMismatchError struct{ Current int64 }

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("savedsearch: version precondition failed; the current version is %d", e.Current)
}

// Unwrap returns [ErrVersionMismatch].
func (e *VersionMismatchError) Unwrap() error { return ErrVersionMismatch }

// CurrentVersion returns Current.
func (e *VersionMismatchError) CurrentVersion() int64 { return e.Current }

// checkVersion locks the live saved search in tx and judges ifMatch against
// its version (nil checks and locks nothing), or returns ErrNotFound.
func checkVersion(ctx context.Context, tx DBTX, org, id uuid.UUID, ifMatch func(int64) bool) error {
	if ifMatch == nil {
		return nil
	}
	var version int64
	err := tx.QueryRow(ctx, savedSearchLockVersion, org, id).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	if !ifMatch(version) {
		return &VersionMismatchError{Current: version}
	}
	return nil
}

func updateSavedSearch(ctx context.Context, db DBTX, org, id uuid.UUID, name *string, brief any) (*SavedSearch, error) {
	var ss SavedSearch
	err := db.QueryRow(ctx, savedSearchUpdate, org, id, name, brief).Scan(
		&ss.ID, &ss.OrganizationID, &ss.Name, &ss.Brief, &ss.Version, &ss.CreatedAt, &ss.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &ss, nil
}

// scanSavedSearch scans savedSearchGet's columns, plus archived_at if archivable.
func scanSavedSearch(row pgx.Row, archivable bool) (*SavedSearch, error) {
	var ss SavedSearch
	dest := []any{&ss.ID, &ss.OrganizationID, &ss.Name, &ss.Brief, &ss.Version,
		&ss.CreatedAt, &ss.UpdatedAt, &ss.Baseline.Items, &ss.Baseline.Cursor}
	if archivable {
		dest = append(dest, &ss.ArchivedAt)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	ss.Baseline.Items = items(ss.Baseline.Items)
	return &ss, nil
}

// wrap maps no row to ErrNotFound and names the operation otherwise.
func wrap(op string, err error) error {
	var mismatch *VersionMismatchError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows), errors.Is(err, ErrNotFound):
		return ErrNotFound
	case errors.As(err, &mismatch):
		return err
	}
	return fmt.Errorf("savedsearch: %s: %w", op, err)
}

// items stores nil as the empty array the column requires.
func items(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// ErrorKind returns [errs.PreconditionFailed].
func (e *VersionMismatchError) ErrorKind() errs.Kind { return errs.PreconditionFailed }
