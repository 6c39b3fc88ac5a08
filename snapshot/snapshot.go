package snapshot

import (
	"bytes"
	"cmp"
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

// Errors carry the kinds of package errs.
var (
	// ErrNotFound reports a snapshot or saved search the organization does
	// not have; [Freeze] also answers it for an archived saved search.
	ErrNotFound = &errs.Error{Kind: errs.NotFound, Message: "snapshot: not found", Detail: "no such snapshot in your organization"}
	// ErrSavedSearchNotFound is the [ErrNotFound] of a list whose saved
	// search the organization does not have.
	ErrSavedSearchNotFound = &errs.Error{Kind: errs.NotFound, Message: "snapshot: saved search not found",
		Detail: "no such saved search in your organization", Err: ErrNotFound}
	// ErrInvalidCursor reports a list cursor this package did not write.
	ErrInvalidCursor = keyset.InvalidCursor("snapshot")
)

// Origins of a snapshot.
const (
	// OriginAPI is a client's start.
	OriginAPI = "api"
	// OriginSchedule is a schedule drain's start.
	OriginSchedule = "schedule"
)

// Page sizes of [Store.ListBySavedSearch].
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// ListParams are the inputs of [Store.ListBySavedSearch].
type ListParams struct {
	// Limit is capped at MaxListLimit; zero or less means DefaultListLimit.
	Limit int
	// Cursor is the previous page's next cursor; empty for the first.
	Cursor string
}

// ListItem is a snapshot in a list, without brief and baseline.
type ListItem struct {
	ID                 uuid.UUID `json:"id"`
	SavedSearchID      uuid.UUID `json:"saved_search_id"`
	SavedSearchVersion int64     `json:"saved_search_version"`
	ContentHash        string    `json:"content_hash"`
	// CreatedBy is nil when unknown.
	CreatedBy *string   `json:"created_by"`
	Origin    string    `json:"origin"`
	CreatedAt time.Time `json:"created_at"`
	// BriefBytes and BaselineBytes are the stored sizes as JSON text.
	BriefBytes    int64 `json:"brief_bytes"`
	BaselineBytes int64 `json:"baseline_bytes"`
	BaselineItems int64 `json:"baseline_items"`
}

// Snapshot is an immutable copy of a saved search's brief and baseline.
type Snapshot struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	SavedSearchID  uuid.UUID `json:"saved_search_id"`
	// SavedSearchVersion is the version brief and baseline were copied at.
	SavedSearchVersion int64 `json:"saved_search_version"`
	// SavedSearchName is the name at the freeze; not in the JSON.
	SavedSearchName string               `json:"-"`
	Brief           savedsearch.Brief    `json:"brief"`
	Baseline        savedsearch.Baseline `json:"baseline"`
	// ContentHash is [ContentHash] of Brief and Baseline.
	ContentHash string `json:"content_hash"`
	// CreatedBy is nil when unknown.
	CreatedBy *string   `json:"created_by"`
	Origin    string    `json:"origin"`
	CreatedAt time.Time `json:"created_at"`

	// rawBrief and rawBaseline are the stored JSON, set by [Read.Snapshot].
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

// ContentHash returns the hex SHA-256 of the canonical JSON (internal/canonjson)
// of {"baseline": baseline, "brief": brief}, empty items as [] and empty
// filters omitted. It fails only for filters that cannot be encoded as JSON.
func ContentHash(brief savedsearch.Brief, baseline savedsearch.Baseline) (string, error) {
	doc, err := contentDoc(brief, baseline)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:]), nil
}

// contentDoc writes canonjson's bytes for ContentHash's document directly,
// only the brief's filters going through canonjson: canonjson on a
// 10,000-item baseline was most of a start's Go time. A test pins the two
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

// appendJSONString appends s as canonjson writes a JSON string.
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

// DBTX is a pgx.Tx, *pgxpool.Pool or *pgx.Conn.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Freeze copies org's live saved search into a new snapshot on tx, in one
// statement (consistent at any isolation level). actor is recorded as
// created_by (empty: NULL); claim (uuid.Nil for none) is the claim the
// snapshot answers: pass the transaction that completes it. It returns
// [ErrNotFound] when there is no live saved search; tx stays usable.
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

// Read is a queued freeze read; [Read.Snapshot] answers once the batch's
// results are closed.
type Read struct {
	snap Snapshot
	err  error
	done bool
}

func newRead(org, savedSearchID uuid.UUID, actor, origin string) *Read {
	r := &Read{snap: Snapshot{ID: ids.New(), OrganizationID: org, SavedSearchID: savedSearchID, Origin: origin}}
	if actor != "" {
		r.snap.CreatedBy = &actor
	}
	return r
}

// QueueRead queues [Freeze]'s read on b in the transaction that will store
// the snapshot; queue [QueueInsert] in the next batch. origin is [OriginAPI]
// (the default) or [OriginSchedule].
func QueueRead(b *pgx.Batch, org, savedSearchID uuid.UUID, actor, origin string) *Read {
	r := newRead(org, savedSearchID, actor, cmp.Or(origin, OriginAPI))
	b.Queue(savedSearchFreezeRead, org, savedSearchID).QueryRow(func(row pgx.Row) error {
		r.done = true
		if err := r.scan(row); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	})
	return r
}

func (r *Read) scan(row pgx.Row) error {
	r.done = true
	err := row.Scan(&r.snap.SavedSearchName, &r.snap.Brief, &r.snap.SavedSearchVersion,
		&r.snap.Baseline.Items, &r.snap.Baseline.Cursor, &r.snap.CreatedAt)
	if err != nil {
		r.err = sqlarg.RowError(err, ErrNotFound, "snapshot: freeze: read saved search")
	}
	return r.err
}

// Snapshot returns the copied snapshot, not yet stored, or [ErrNotFound]
// when there was no live saved search, or the read's error.
func (r *Read) Snapshot() (*Snapshot, error) {
	switch {
	case !r.done:
		return nil, errors.New("snapshot: the freeze read has not run")
	case r.err != nil:
		return nil, r.err
	}
	snap := r.snap
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

// QueueInsert queues the insert of snap, from [Read.Snapshot], on b. claim
// (uuid.Nil for none) lets the sweeper check the claim's retention. Errors
// surface in the batch's results.
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

// Cursors returns a copy of s that signs its cursors with k; the default
// zero key is accepted by no other process.
func (s *Store) Cursors(k keyset.Key) *Store {
	c := *s
	c.cursors = k
	return &c
}

// Get returns snapshot id of org, or [ErrNotFound].
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (_ *Snapshot, err error) {
	defer dberr.Annotate(&err)
	snap, err := scanSnapshot(s.db.QueryRow(ctx, snapshotGet, org, id))
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "snapshot: get")
	}
	return snap, nil
}

// ListBySavedSearch returns a page of the snapshots of org's saved search
// (archived too), newest first, and the next cursor ("" after the last),
// or [ErrSavedSearchNotFound] or [ErrInvalidCursor].
func (s *Store) ListBySavedSearch(ctx context.Context, org, savedSearchID uuid.UUID, p ListParams) (_ []ListItem, _ string, err error) {
	defer dberr.Annotate(&err)
	q, err := s.cursors.Read(keyset.List{Name: "snapshot.list", Org: org, Parent: savedSearchID},
		p.Cursor, p.Limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	if err := s.known(ctx, "list", org, savedSearchID, ErrSavedSearchNotFound); err != nil {
		return nil, "", err
	}
	return keyset.Query(ctx, s.db, "snapshot: list", q, pgx.RowToStructByPos[ListItem],
		func(it ListItem) keyset.Position { return keyset.Position{CreatedAt: it.CreatedAt, ID: it.ID} },
		snapshotListBySavedSearch, org, savedSearchID, q.At, q.ID, q.Limit+1)
}

// known returns nil when org has saved search id (archived too), else
// missing, or the read's error naming op.
func (s *Store) known(ctx context.Context, op string, org, id uuid.UUID, missing error) error {
	var known bool
	if err := s.db.QueryRow(ctx, savedSearchKnown, org, id).Scan(&known); err != nil {
		return fmt.Errorf("snapshot: %s: %w", op, err)
	}
	if !known {
		return missing
	}
	return nil
}

func scanSnapshot(row pgx.Row) (*Snapshot, error) {
	var snap Snapshot
	err := row.Scan(&snap.ID, &snap.OrganizationID, &snap.SavedSearchID, &snap.SavedSearchVersion,
		&snap.SavedSearchName, &snap.Brief, &snap.Baseline, &snap.ContentHash, &snap.CreatedBy, &snap.Origin, &snap.CreatedAt)
	if err != nil {
		return nil, err
	}
	if snap.Baseline.Items == nil {
		snap.Baseline.Items = []string{}
	}
	return &snap, nil
}
