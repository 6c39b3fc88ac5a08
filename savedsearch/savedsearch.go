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

// The errors of this package carry the kinds of package errs, as its
// package doc says of every domain package.
var (
	// ErrNotFound reports a saved search that does not exist, belongs to
	// another organization or is archived.
	ErrNotFound = &errs.Error{Kind: errs.NotFound, Message: "savedsearch: not found", Detail: "no such saved search in your organization"}
	// ErrInvalid is wrapped by every error about input the store refuses
	// before it runs any SQL. The same error also wraps the
	// validator.ValidationErrors that name the fields.
	ErrInvalid = errs.New(errs.Invalid, "savedsearch: invalid input")
	// ErrInvalidCursor reports a list cursor this package did not write.
	ErrInvalidCursor = keyset.InvalidCursor("savedsearch")
)

// maxQueryLenSQL is MaxQueryLen for the list query.
const maxQueryLenSQL = "2000"

// Limits of a saved search, as the validate tags below state them.
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

// UnmarshalJSON decodes a brief keeping the numbers in Filters as
// json.Number, so a filter value survives a round trip through the database
// exactly as the client wrote it (float64 would round large integers).
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
	// Items holds at most 10000 strings of 1 to 200 characters. It is
	// written as [] when empty, never null.
	Items []string `json:"items" validate:"max=10000,dive,required,max=200"`
	// Cursor is where the last search stopped; nil when it has not run.
	Cursor *string `json:"cursor"`
}

// MarshalJSON writes the baseline with Items as [] when empty.
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
	// Version starts at 1 and grows by one on every change to the name,
	// the brief or the baseline.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// ArchivedAt is when the saved search was archived; nil (null) while
	// it is live. Only [Store.GetAny] and an archived list read it.
	ArchivedAt *time.Time `json:"archived_at"`
}

// Summary is a saved search as its list shows it: what names it and how
// large it is, without the filters and the baseline ([Store.Get] has
// those). Every field is bounded, so a page of MaxListLimit summaries is
// too, whatever the saved searches hold.
type Summary struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	Name           string    `json:"name"`
	// Query is the brief's query, at most MaxQueryLen characters.
	Query     string    `json:"query"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// BriefBytes is the size of the stored brief as JSON text;
	// BaselineItems counts the baseline's items.
	BriefBytes    int64 `json:"brief_bytes"`
	BaselineItems int64 `json:"baseline_items"`
	// ArchivedAt is when it was archived: set in a list of the archived
	// ones (ListParams.Archived), omitted for a live one.
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
}

func (s Summary) position() keyset.Position { return keyset.Position{CreatedAt: s.CreatedAt, ID: s.ID} }

// CreateParams are the inputs of [Store.Create]. The json names are those of
// the HTTP request body.
type CreateParams struct {
	// Name is 1 to 200 characters.
	Name  string `json:"name" validate:"required,max=200"`
	Brief Brief  `json:"brief"`
	// Baseline defaults to no items and no cursor.
	Baseline Baseline `json:"baseline"`
	// Actor is recorded as created_by; empty records NULL.
	Actor string `json:"-"`
}

// Validate returns an error wrapping [ErrInvalid] and the
// validator.ValidationErrors naming each refused field, or, for input over
// a size limit (see [MaxSavedSearchBytes]), a [*LimitError]; or nil.
func (p CreateParams) Validate() error {
	if err := check(p); err != nil {
		return err
	}
	return limitError(append(checkBriefLimits(&p.Brief, "brief"), checkBaselineLimits(&p.Baseline, "baseline")...))
}

// UpdateParams are the inputs of [Store.Update]: a nil field keeps its value.
type UpdateParams struct {
	// Name, when set, is 1 to 200 characters.
	Name *string `json:"name" validate:"omitnil,min=1,max=200"`
	// Brief, when set, replaces the whole brief.
	Brief *Brief `json:"brief"`
	// IfMatch, when set, is a precondition on the version the change
	// applies to: it is called with the stored version, under the row lock
	// the change takes, and a false answer changes nothing and returns a
	// [*VersionMismatchError]. Nil applies the change to any version.
	IfMatch func(version int64) bool `json:"-"`
}

// Validate returns an error wrapping [ErrInvalid] and the
// validator.ValidationErrors naming each refused field, or a [*LimitError]
// for a brief over a size limit; or nil.
func (p UpdateParams) Validate() error {
	if err := check(p); err != nil {
		return err
	}
	if p.Brief == nil {
		return nil
	}
	return limitError(checkBriefLimits(p.Brief, "brief"))
}

// Validate returns an error wrapping [ErrInvalid] and the
// validator.ValidationErrors naming each refused field, or a [*LimitError]
// for a baseline over a size limit; or nil.
func (b Baseline) Validate() error {
	if err := check(b); err != nil {
		return err
	}
	return limitError(checkBaselineLimits(&b, ""))
}

// ListParams are the inputs of [Store.List].
type ListParams struct {
	// Limit is the page size: 1 to MaxListLimit; zero or less means
	// DefaultListLimit, more means MaxListLimit.
	Limit int
	// Cursor is the next cursor a previous page returned; empty for the
	// first page.
	Cursor string
	// Archived lists the archived saved searches instead of the live ones,
	// newest first by creation, each with its ArchivedAt.
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

// DBTX is what the SQL-running helpers need: a *pgxpool.Pool or a pgx.Tx.
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

// Cursors returns a copy of s whose lists sign and verify their cursors
// with k, the database's cursor key in production; without it they use
// the zero [keyset.Key], whose cursors no other process accepts.
func (s *Store) Cursors(k keyset.Key) *Store {
	c := *s
	c.cursors = k
	return &c
}

// Create stores a new saved search at version 1 with its baseline and
// returns it. It returns an error wrapping [ErrInvalid] for input
// [CreateParams.Validate] refuses; other errors come from the database.
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

// CreateIn is [Store.Create] in tx, a transaction of the caller's: a keyed
// create inserts the saved search and completes its claim in one
// transaction. It sends the saved search's insert and its baseline's in
// one round trip.
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
	var raw []byte
	b := &pgx.Batch{}
	b.Queue(savedSearchInsert, args).QueryRow(func(row pgx.Row) error {
		return row.Scan(&ss.ID, &ss.OrganizationID, &ss.Name, &raw, &ss.Version, &ss.CreatedAt, &ss.UpdatedAt)
	})
	b.Queue(baselineInsert, pgx.StrictNamedArgs{
		"id": args["id"], "org": org, "items": items(p.Baseline.Items), "cursor": p.Baseline.Cursor,
	}).QueryRow(func(row pgx.Row) error {
		return row.Scan(&ss.Baseline.Items, &ss.Baseline.Cursor)
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("savedsearch: create: %w", err)
	}
	if err := json.Unmarshal(raw, &ss.Brief); err != nil {
		return nil, fmt.Errorf("savedsearch: create: decode brief: %w", err)
	}
	ss.Baseline.Items = items(ss.Baseline.Items)
	return &ss, nil
}

// Get returns the live saved search id of org. It returns [ErrNotFound] when
// there is none: absent, archived, or another organization's.
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (_ *SavedSearch, err error) {
	defer dberr.Annotate(&err)
	return getSavedSearch(ctx, s.db, org, id)
}

// List returns a page of org's live saved searches as [Summary] values,
// newest first, and the cursor of the next page ("" after the last page).
// It returns [ErrInvalidCursor] for a cursor it did not write.
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

// Update changes the name and/or the brief of a live saved search, bumps its
// version and returns it. With neither set, or with the values it already
// has, it changes nothing (the version and updated_at stay) and returns the
// saved search as it is: it sets values, so a repeat changes nothing further. It returns an error wrapping [ErrInvalid] for
// input [UpdateParams.Validate] refuses and [ErrNotFound] as [Store.Get].
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

// UpdateFunc changes the name and/or the brief of a live saved search to
// what change computes from the saved search as stored, bumps its version
// and returns it, as [Store.Update] does with change's answer (whose
// IfMatch is ignored). The read, the precondition ifMatch (nil: none, as
// [UpdateParams.IfMatch]), change and the write run in one transaction
// that holds the saved search's row lock from the read (SELECT ... FOR
// UPDATE) to the commit. So a read-modify-write, such as an RFC 7396 merge
// patch, never writes over a version it did not read, and concurrent calls
// on one saved search run one after another, each on what the one before
// wrote: without a precondition a change always applies, however many
// writers race it, rather than failing a precondition nobody set. change
// runs under the lock, so it must only compute.
//
// It returns [ErrNotFound] as [Store.Get], a [*VersionMismatchError] when
// ifMatch refuses the stored version, the error change returns as it is,
// and the errors of [Store.Update] for the parameters change returns; on
// any error nothing is written.
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
		cur.Baseline.Items = items(cur.Baseline.Items)
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

// update runs inside a writer's transaction that may hold the saved
// search's row lock already: it sets the name and/or brief p carries, as
// savedSearchUpdate does, and returns the saved search with its baseline.
// It returns ErrNotFound when there is no live saved search.
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

// ReplaceBaseline sets the whole baseline of a live saved search to b, bumps
// its version and returns it. A baseline equal to the stored one changes
// nothing: the version and updated_at stay. It returns an error wrapping
// [ErrInvalid] when b breaks the limits of [Baseline] ([Baseline.Validate])
// and [ErrNotFound] as [Store.Get].
func (s *Store) ReplaceBaseline(ctx context.Context, org, id uuid.UUID, b Baseline) (_ *SavedSearch, err error) {
	defer dberr.Annotate(&err)
	return s.ReplaceBaselineIf(ctx, org, id, b, nil)
}

// ReplaceBaselineIf is [Store.ReplaceBaseline] with the precondition
// ifMatch on the stored version, as [UpdateParams.IfMatch]: a false answer
// changes nothing and returns a [*VersionMismatchError]. Nil is no
// precondition.
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
		// The saved search first: its row lock orders this writer after
		// every other, and the version bump commits with the baseline.
		// With nothing to set it bumps nothing either.
		if ss, err = updateSavedSearch(ctx, tx, org, id, nil, nil); err != nil {
			return err
		}
		err = tx.QueryRow(ctx, baselineReplace, org, id, items(b.Items), b.Cursor).
			Scan(&ss.Baseline.Items, &ss.Baseline.Cursor, &ss.Version, &ss.UpdatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			// The stored baseline is b already: nothing changed.
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

// Archive archives a live saved search: later reads and starts answer
// [ErrNotFound], while its snapshots and Runs stay readable. It returns
// [ErrNotFound] as [Store.Get], so archiving twice answers ErrNotFound.
func (s *Store) Archive(ctx context.Context, org, id uuid.UUID) (err error) {
	defer dberr.Annotate(&err)
	return s.ArchiveIf(ctx, org, id, nil)
}

// ArchiveIf is [Store.Archive] with the precondition ifMatch on the stored
// version, as [UpdateParams.IfMatch]: a false answer archives nothing and
// returns a [*VersionMismatchError]. Nil is no precondition.
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

// Exists reports whether org has a live saved search id. Errors come from
// the database.
func (s *Store) Exists(ctx context.Context, org, id uuid.UUID) (_ bool, err error) {
	defer dberr.Annotate(&err)
	var ok bool
	if err := s.db.QueryRow(ctx, savedSearchExists, org, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("savedsearch: exists: %w", err)
	}
	return ok, nil
}

// GetAny returns the saved search id of org, live or archived (ArchivedAt
// says which): the audit trail of an archived saved search starts here. It
// returns [ErrNotFound] when org has no such saved search.
func (s *Store) GetAny(ctx context.Context, org, id uuid.UUID) (_ *SavedSearch, err error) {
	defer dberr.Annotate(&err)
	ss, err := scanSavedSearch(s.db.QueryRow(ctx, savedSearchGetAny, org, id), true)
	if err != nil {
		return nil, wrap("get", err)
	}
	return ss, nil
}

// ErrVersionMismatch is wrapped by every [*VersionMismatchError].
var ErrVersionMismatch = &errs.Error{Kind: errs.PreconditionFailed, Message: "savedsearch: version precondition failed",
	Detail: "the saved search changed since the version If-Match names; read it again (its ETag) and reapply the change"}

// VersionMismatchError reports a change refused by its precondition on the
// version (an HTTP If-Match): Current is the stored version it was judged
// against.
type VersionMismatchError struct{ Current int64 }

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("savedsearch: version precondition failed; the current version is %d", e.Current)
}

// Unwrap returns [ErrVersionMismatch]: its kind, its detail.
func (e *VersionMismatchError) Unwrap() error { return ErrVersionMismatch }

// CurrentVersion returns Current.
func (e *VersionMismatchError) CurrentVersion() int64 { return e.Current }

// checkVersion, inside a writer's transaction, locks the live saved search
// and judges ifMatch against its version before the change runs: the lock
// is the one the change takes anyway, so no writer can move the version
// between the check and the change. Nil checks nothing (and locks nothing
// here). It returns ErrNotFound when there is no live saved search.
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

func getSavedSearch(ctx context.Context, db DBTX, org, id uuid.UUID) (*SavedSearch, error) {
	ss, err := scanSavedSearch(db.QueryRow(ctx, savedSearchGet, org, id), false)
	if err != nil {
		return nil, wrap("get", err)
	}
	return ss, nil
}

// updateSavedSearch runs savedSearchUpdate and returns the saved search
// without its baseline, or ErrNotFound.
func updateSavedSearch(ctx context.Context, db DBTX, org, id uuid.UUID, name *string, brief any) (*SavedSearch, error) {
	var (
		ss  SavedSearch
		raw []byte
	)
	err := db.QueryRow(ctx, savedSearchUpdate, org, id, name, brief).Scan(
		&ss.ID, &ss.OrganizationID, &ss.Name, &raw, &ss.Version, &ss.CreatedAt, &ss.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &ss.Brief); err != nil {
		return nil, fmt.Errorf("decode brief: %w", err)
	}
	return &ss, nil
}

// scanSavedSearch scans the columns of savedSearchGet, and with
// archivable those of savedSearchGetAny, which add archived_at.
func scanSavedSearch(row pgx.Row, archivable bool) (*SavedSearch, error) {
	var (
		ss  SavedSearch
		raw []byte
	)
	dest := []any{&ss.ID, &ss.OrganizationID, &ss.Name, &raw, &ss.Version,
		&ss.CreatedAt, &ss.UpdatedAt, &ss.Baseline.Items, &ss.Baseline.Cursor}
	if archivable {
		dest = append(dest, &ss.ArchivedAt)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &ss.Brief); err != nil {
		return nil, fmt.Errorf("decode brief: %w", err)
	}
	ss.Baseline.Items = items(ss.Baseline.Items)
	return &ss, nil
}

// wrap translates the driver's answer at the boundary: no row is
// ErrNotFound, anything else names the operation.
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

// items stores a nil baseline as the empty array the column requires.
func items(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// ErrorKind returns [errs.PreconditionFailed].
func (e *VersionMismatchError) ErrorKind() errs.Kind { return errs.PreconditionFailed }
