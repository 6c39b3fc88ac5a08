package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/canonjson"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
	"github.com/searchd/searchd/savedsearch"
)

// The errors of this package carry the kinds of package errs, as its
// package doc says of every domain package.
var (
	// ErrNotFound reports a snapshot, or a saved search to freeze or list,
	// that does not exist in the organization. [Freeze] also answers it
	// for an archived saved search.
	ErrNotFound = &errs.Error{Kind: errs.NotFound, Message: "snapshot: not found", Detail: "no such snapshot in your organization"}
	// ErrSavedSearchNotFound is the [ErrNotFound] of a list whose saved
	// search is what the organization does not have.
	ErrSavedSearchNotFound = &errs.Error{Kind: errs.NotFound, Message: "snapshot: saved search not found",
		Detail: "no such saved search in your organization", Err: ErrNotFound}
	// ErrInvalidCursor reports a list cursor this package did not write.
	ErrInvalidCursor = keyset.InvalidCursor("snapshot")
)

// Origins of a snapshot: who started the freeze.
const (
	// OriginAPI is a start a client asked for.
	OriginAPI = "api"
	// OriginSchedule is a start the drain of a schedule made.
	OriginSchedule = "schedule"
)

// Page sizes of [Store.ListBySavedSearch].
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// ListParams are the inputs of [Store.ListBySavedSearch].
type ListParams struct {
	// Limit is the page size: 1 to MaxListLimit; zero or less means
	// DefaultListLimit, more means MaxListLimit.
	Limit int
	// Cursor is the next cursor a previous page returned; empty for the
	// first page.
	Cursor string
}

// ListItem is a snapshot as its saved search's audit trail lists it: what
// identifies it and how large it is, without the brief and the baseline
// (GET /v1/snapshots/{id} has those). Every field is bounded, so a page of
// MaxListLimit items is too, whatever the snapshots hold.
type ListItem struct {
	ID                 uuid.UUID `json:"id"`
	SavedSearchID      uuid.UUID `json:"saved_search_id"`
	SavedSearchVersion int64     `json:"saved_search_version"`
	ContentHash        string    `json:"content_hash"`
	// CreatedBy is the actor that started the freeze; nil when unknown.
	CreatedBy *string `json:"created_by"`
	// Origin says who started the freeze: [OriginAPI] or [OriginSchedule].
	Origin    string    `json:"origin"`
	CreatedAt time.Time `json:"created_at"`
	// BriefBytes and BaselineBytes are the sizes of the stored brief and
	// baseline as JSON text; BaselineItems counts the baseline's items.
	BriefBytes    int64 `json:"brief_bytes"`
	BaselineBytes int64 `json:"baseline_bytes"`
	BaselineItems int64 `json:"baseline_items"`
}

// Snapshot is an immutable copy of a saved search's brief and baseline.
type Snapshot struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	SavedSearchID  uuid.UUID `json:"saved_search_id"`
	// SavedSearchVersion is the version of the saved search the brief and
	// the baseline were both copied at.
	SavedSearchVersion int64 `json:"saved_search_version"`
	// SavedSearchName is the saved search's name at the freeze; it names
	// the Run. It is stored but not part of the snapshot's JSON.
	SavedSearchName string               `json:"-"`
	Brief           savedsearch.Brief    `json:"brief"`
	Baseline        savedsearch.Baseline `json:"baseline"`
	// ContentHash is [ContentHash] of Brief and Baseline: equal content,
	// equal hash, whatever the version.
	ContentHash string `json:"content_hash"`
	// CreatedBy is the actor that started the freeze; nil when unknown.
	CreatedBy *string `json:"created_by"`
	// Origin says who started the freeze: [OriginAPI] (a client's start)
	// or [OriginSchedule] (the drain of the saved search's schedule, for
	// the actor who set it).
	Origin    string    `json:"origin"`
	CreatedAt time.Time `json:"created_at"`

	// rawBrief and rawBaseline are the stored JSON of a snapshot a freeze
	// made, set by [Read.Snapshot].
	rawBrief, rawBaseline []byte
}

// Summary is the part of a snapshot a start answers with.
type Summary struct {
	ID                 uuid.UUID `json:"id"`
	SavedSearchID      uuid.UUID `json:"saved_search_id"`
	SavedSearchVersion int64     `json:"saved_search_version"`
	ContentHash        string    `json:"content_hash"`
	CreatedAt          time.Time `json:"created_at"`
}

// Summary returns the summary of s.
func (s *Snapshot) Summary() Summary {
	return Summary{
		ID:                 s.ID,
		SavedSearchID:      s.SavedSearchID,
		SavedSearchVersion: s.SavedSearchVersion,
		ContentHash:        s.ContentHash,
		CreatedAt:          s.CreatedAt,
	}
}

// ContentHash returns the hex SHA-256 of the canonical JSON (see
// internal/canonjson: sorted keys, no white space, numbers as written) of
// {"baseline": baseline, "brief": brief}, with empty items written as []
// and empty filters omitted. It returns an error only for a brief whose
// filters cannot be encoded as JSON.
func ContentHash(brief savedsearch.Brief, baseline savedsearch.Baseline) (string, error) {
	doc, err := contentDoc(brief, baseline)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:]), nil
}

// contentDoc writes the canonical document ContentHash hashes directly:
// the bytes canonjson writes for it (keys sorted, no white space, strings
// escaped as encoding/json does without HTML escaping), but only the
// brief's free-form filters go through canonjson. Every freeze hashes its
// whole baseline, and canonjson's reflection, decode and re-encode of up
// to 10,000 items were most of a new start's Go time. A test pins the two
// writers to the same bytes.
func contentDoc(brief savedsearch.Brief, baseline savedsearch.Baseline) ([]byte, error) {
	doc := make([]byte, 0, 64+len(brief.Query)+len(baseline.Items)*48)
	doc = append(doc, `{"baseline":{"cursor":`...)
	if baseline.Cursor == nil {
		doc = append(doc, "null"...)
	} else {
		doc = appendJSONString(doc, *baseline.Cursor)
	}
	doc = append(doc, `,"items":[`...)
	for i, item := range baseline.Items {
		if i > 0 {
			doc = append(doc, ',')
		}
		doc = appendJSONString(doc, item)
	}
	doc = append(doc, `]},"brief":{`...)
	if len(brief.Filters) > 0 {
		filters, err := canonjson.Marshal(brief.Filters)
		if err != nil {
			return nil, fmt.Errorf("snapshot: content hash: %w", err)
		}
		doc = append(doc, `"filters":`...)
		doc = append(doc, filters...)
		doc = append(doc, ',')
	}
	doc = append(doc, `"query":`...)
	doc = appendJSONString(doc, brief.Query)
	return append(doc, "}}"...), nil
}

// appendJSONString appends s as canonjson writes a JSON string: copied
// between quotes when it is printable ASCII without a quote or a
// backslash, else through encoding/json without HTML escaping.
func appendJSONString(dst []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 0x20 && c <= 0x7e && c != '"' && c != '\\'
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
}

// DBTX is what the SQL-running functions need: a pgx.Tx, a *pgxpool.Pool or
// a *pgx.Conn.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Freeze copies the live saved search savedSearchID of org into a new
// snapshot, on tx, and returns it. actor is recorded as created_by (empty
// records NULL).
//
// The brief, the baseline and the version are read in one statement, so
// the snapshot is one consistent picture whatever tx's isolation level, and
// tx may even be a pool. Pass the transaction that also completes the
// surface claim, so the snapshot exists exactly when the claim says so.
//
// It returns [ErrNotFound] when org has no live saved search savedSearchID
// (absent, archived, or another organization's); the transaction is then
// still usable. Other errors come from the database.
//
// claim is the id of the claim the snapshot answers (uuid.Nil for none):
// the sweeper finds the claim by it (see [QueueInsert]).
//
// Freeze costs two round trips; [QueueRead] and [QueueInsert] are the same
// two statements for a caller that pipelines them with its own.
func Freeze(ctx context.Context, tx DBTX, org, savedSearchID uuid.UUID, actor string, claim uuid.UUID) (*Snapshot, error) {
	r := newRead(org, savedSearchID, actor, OriginAPI)
	if err := r.scan(tx.QueryRow(ctx, savedSearchFreezeRead, org, savedSearchID)); err != nil {
		return nil, err
	}
	snap, err := r.Snapshot()
	if err != nil {
		return nil, err
	}
	tag, err := tx.Exec(ctx, snapshotInsert, snap.insertArgs(claim))
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("inserted %d rows", tag.RowsAffected())
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: freeze: insert: %w", err)
	}
	return snap, nil
}

// Read is the first half of a freeze queued on a batch: the copy of a saved
// search, not yet stored. [Read.Snapshot] answers once the batch's results
// are closed.
type Read struct {
	snap  Snapshot
	brief []byte
	err   error
	done  bool
}

func newRead(org, savedSearchID uuid.UUID, actor, origin string) *Read {
	r := &Read{snap: Snapshot{ID: ids.New(), OrganizationID: org, SavedSearchID: savedSearchID, Origin: origin}}
	if actor != "" {
		r.snap.CreatedBy = &actor
	}
	return r
}

// QueueRead queues on b the read of [Freeze]: the live saved search
// savedSearchID of org with its baseline and the database clock, in one
// statement. Queue it in the transaction that will store the snapshot
// (after [pgx.Batch.BeginTx], or on the transaction), then queue the
// insert with [QueueInsert] in the next batch. actor is recorded as
// created_by (empty records NULL), and origin ([OriginAPI] or
// [OriginSchedule]; empty is OriginAPI) as the freeze's origin.
func QueueRead(b *pgx.Batch, org, savedSearchID uuid.UUID, actor, origin string) *Read {
	if origin == "" {
		origin = OriginAPI
	}
	r := newRead(org, savedSearchID, actor, origin)
	b.Queue(savedSearchFreezeRead, org, savedSearchID).QueryRow(func(row pgx.Row) error {
		r.done = true
		if err := r.scan(row); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	})
	return r
}

// scan reads the freeze read's row into r; a missing row is ErrNotFound.
func (r *Read) scan(row pgx.Row) error {
	r.done = true
	err := row.Scan(&r.snap.SavedSearchName, &r.brief, &r.snap.SavedSearchVersion,
		&r.snap.Baseline.Items, &r.snap.Baseline.Cursor, &r.snap.CreatedAt)
	if err != nil {
		r.err = sqlarg.RowError(err, ErrNotFound, "snapshot: freeze: read saved search")
	}
	return r.err
}

// Snapshot returns the snapshot the read copied, with its id, content hash
// and created_at (the database clock of the read) set, not yet stored. It
// returns [ErrNotFound] when org had no live saved search savedSearchID,
// and an error when the read did not run or failed.
func (r *Read) Snapshot() (*Snapshot, error) {
	switch {
	case !r.done:
		return nil, errors.New("snapshot: the freeze read has not run")
	case r.err != nil:
		return nil, r.err
	}
	snap := r.snap
	if err := json.Unmarshal(r.brief, &snap.Brief); err != nil {
		return nil, fmt.Errorf("snapshot: freeze: decode brief: %w", err)
	}
	if snap.Baseline.Items == nil {
		snap.Baseline.Items = []string{}
	}
	var err error
	if snap.ContentHash, err = ContentHash(snap.Brief, snap.Baseline); err != nil {
		return nil, err
	}
	if snap.rawBrief, err = json.Marshal(snap.Brief); err != nil {
		return nil, fmt.Errorf("snapshot: freeze: encode brief: %w", err)
	}
	if snap.rawBaseline, err = json.Marshal(snap.Baseline); err != nil {
		return nil, fmt.Errorf("snapshot: freeze: encode baseline: %w", err)
	}
	return &snap, nil
}

// QueueInsert queues on b the insert that stores snap, a snapshot
// [Read.Snapshot] returned: the second half of [Freeze]. claim is the id
// of the claim whose completion, in the same transaction, names the
// snapshot (uuid.Nil for none): stored with it, it lets the sweeper ask
// whether that claim is still retained by its primary key. The batch's
// results return an error when the insert fails.
func QueueInsert(b *pgx.Batch, snap *Snapshot, claim uuid.UUID) {
	b.Queue(snapshotInsert, snap.insertArgs(claim)).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("snapshot: freeze: insert: inserted %d rows", tag.RowsAffected())
		}
		return nil
	})
}

func (s *Snapshot) insertArgs(claim uuid.UUID) pgx.StrictNamedArgs {
	return pgx.StrictNamedArgs{"claim_id": sqlarg.Null(claim),
		"id": s.ID, "org": s.OrganizationID, "saved_search_id": s.SavedSearchID,
		"version": s.SavedSearchVersion, "name": s.SavedSearchName, "brief": string(s.rawBrief),
		"baseline": string(s.rawBaseline), "content_hash": s.ContentHash, "created_by": s.CreatedBy,
		"origin": s.Origin, "created_at": s.CreatedAt,
	}
}

// Store reads snapshots. It is safe for concurrent use.
type Store struct {
	db      DBTX
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

// Get returns snapshot id of org. It returns [ErrNotFound] when org has no
// such snapshot, including another organization's.
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (_ *Snapshot, err error) {
	defer dberr.Annotate(&err)
	snap, err := scanSnapshot(s.db.QueryRow(ctx, snapshotGet, org, id))
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "snapshot: get")
	}
	return snap, nil
}

// ListBySavedSearch returns a page of the snapshots of org's saved search
// savedSearchID, newest first, as [ListItem] summaries (the audit trail of
// its starts), and the cursor of the next page ("" after the last). It
// works for an archived saved search too. It returns
// [ErrSavedSearchNotFound] (an [ErrNotFound]) when org has no such saved search, archived or not, [ErrInvalidCursor] for a
// cursor it did not write, and an empty page when there are no snapshots.
func (s *Store) ListBySavedSearch(ctx context.Context, org, savedSearchID uuid.UUID, p ListParams) (_ []ListItem, _ string, err error) {
	defer dberr.Annotate(&err)
	q, err := s.cursors.Read(keyset.List{Name: "snapshot.list", Org: org, Parent: savedSearchID},
		p.Cursor, p.Limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	var known bool
	if err := s.db.QueryRow(ctx, savedSearchKnown, org, savedSearchID).Scan(&known); err != nil {
		return nil, "", fmt.Errorf("snapshot: list: %w", err)
	}
	if !known {
		return nil, "", ErrSavedSearchNotFound
	}
	return keyset.Query(ctx, s.db, "snapshot: list", q, pgx.RowToStructByPos[ListItem],
		func(it ListItem) keyset.Position { return keyset.Position{CreatedAt: it.CreatedAt, ID: it.ID} },
		snapshotListBySavedSearch, org, savedSearchID, q.At, q.ID, q.Limit+1)
}

func scanSnapshot(row pgx.Row) (*Snapshot, error) {
	var (
		snap            Snapshot
		brief, baseline []byte
	)
	err := row.Scan(&snap.ID, &snap.OrganizationID, &snap.SavedSearchID, &snap.SavedSearchVersion,
		&snap.SavedSearchName, &brief, &baseline, &snap.ContentHash, &snap.CreatedBy, &snap.Origin, &snap.CreatedAt)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(brief, &snap.Brief); err != nil {
		return nil, fmt.Errorf("decode brief: %w", err)
	}
	if err := json.Unmarshal(baseline, &snap.Baseline); err != nil {
		return nil, fmt.Errorf("decode baseline: %w", err)
	}
	if snap.Baseline.Items == nil {
		snap.Baseline.Items = []string{}
	}
	return &snap, nil
}
