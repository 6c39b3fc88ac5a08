package savedsearch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
)

// The audit reads of saved searches: the console's, which see archived
// saved searches too. Every one takes the organization and reads nothing
// of another. Every answer is bounded in size whatever the rows hold (a
// row stored before the limits existed included), so a page built of them
// is too: the lists read summaries, a saved search is read without its
// baseline items, which [Store.BaselineItems] reads a page at a time.

// AuditBriefBytes is the largest stored brief, as PostgreSQL's JSON text
// (brief_bytes), that [Store.GetEntry] reads whole: twice MaxBriefBytes,
// as jsonb's text spaces its separators, so every brief within the limits
// fits. A larger one, stored before the limits existed, is read as its
// query alone.
const AuditBriefBytes = 2 * MaxBriefBytes

// maxItemLenSQL is MaxItemLen for the page of items.
const maxItemLenSQL = "200"

// Entry is a saved search as the audit sees it, archived or not, without
// its baseline's items.
type Entry struct {
	ID             uuid.UUID
	OrganizationID uuid.UUID
	Name           string
	// Brief is the whole brief when BriefBytes is at most AuditBriefBytes,
	// else its query alone (cut to MaxQueryLen characters): see BriefCut.
	Brief Brief
	// BriefBytes is the stored brief's size as JSON text.
	BriefBytes int64
	Version    int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// BaselineItems counts the baseline's items; BaselineCursor is its
	// cursor, cut to MaxCursorBytes.
	BaselineItems  int64
	BaselineCursor *string
	// CreatedBy is the actor that created it; nil when unknown.
	CreatedBy *string
	// ArchivedAt is when it was archived; nil while it is live.
	ArchivedAt *time.Time
}

// BriefCut reports whether Brief holds the query alone, the stored brief
// being over AuditBriefBytes.
func (e *Entry) BriefCut() bool { return e.BriefBytes > AuditBriefBytes }

// AuditSummary is a saved search as the audit lists it: its [Summary] and
// who created it.
type AuditSummary struct {
	Summary
	// CreatedBy is the actor that created it; nil when unknown.
	CreatedBy *string
}

// AuditListParams are the inputs of [Store.ListAll].
type AuditListParams struct {
	// Name, when set, keeps the saved searches whose name contains it,
	// ignoring case; at most MaxNameLen characters.
	Name string
	// IncludeArchived lists archived saved searches too.
	IncludeArchived bool
	// Limit and Cursor are as in [ListParams].
	Limit  int
	Cursor string
}

// ListAll returns a page of summaries of org's saved searches, newest
// first, archived ones too when p.IncludeArchived, and the cursor of the
// next page ("" after the last). It reads the stored sizes and the query
// (cut to MaxQueryLen characters), never the filters or the baseline. It
// returns [ErrInvalidCursor] for a cursor it did not write and an error
// wrapping [ErrInvalid] for a name filter over MaxNameLen.
func (s *Store) ListAll(ctx context.Context, org uuid.UUID, p AuditListParams) (_ []AuditSummary, _ string, err error) {
	defer dberr.Annotate(&err)
	q, err := s.cursors.Read(keyset.List{Name: "savedsearch.all", Org: org}, p.Cursor, p.Limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	if utf8.RuneCountInString(p.Name) > MaxNameLen || !utf8.ValidString(p.Name) {
		return nil, "", fmt.Errorf("%w: name filter: at most %d characters of UTF-8", ErrInvalid, MaxNameLen)
	}
	var pattern any
	if p.Name != "" {
		pattern = "%" + likeEscaper.Replace(p.Name) + "%"
	}
	return keyset.Query(ctx, s.db, "savedsearch: list all", q, pgx.RowToStructByPos[AuditSummary], AuditSummary.position,
		savedSearchAuditList, org, q.At, q.ID, q.Limit+1, p.IncludeArchived, pattern)
}

// GetEntry returns org's saved search id, archived or not, without its
// baseline's items (see [Entry]). It returns [ErrNotFound] when org has
// none (another organization's included).
func (s *Store) GetEntry(ctx context.Context, org, id uuid.UUID) (_ *Entry, err error) {
	defer dberr.Annotate(&err)
	var (
		e   Entry
		raw []byte
	)
	err = s.db.QueryRow(ctx, savedSearchAuditGet, org, id, AuditBriefBytes).Scan(&e.ID, &e.OrganizationID, &e.Name,
		&raw, &e.BriefBytes, &e.Version, &e.CreatedAt, &e.UpdatedAt, &e.BaselineItems, &e.BaselineCursor,
		&e.CreatedBy, &e.ArchivedAt)
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "savedsearch: get any")
	}
	if err := json.Unmarshal(raw, &e.Brief); err != nil {
		return nil, fmt.Errorf("savedsearch: get any: decode brief: %w", err)
	}
	return &e, nil
}

// BaselineItems returns a page of the current baseline items of org's
// saved search id, archived or not: at most limit (1 to MaxListLimit)
// items after the first after, in their order, each cut to MaxItemLen
// characters (a longer one, stored before the limit, ends in "…"), and
// the position to continue after, 0 on the last page. A saved search org
// does not have has no items.
func (s *Store) BaselineItems(ctx context.Context, org, id uuid.UUID, after int64, limit int) (_ []string, next int64, err error) {
	defer dberr.Annotate(&err)
	limit = max(1, min(limit, MaxListLimit))
	rows, _ := s.db.Query(ctx, savedSearchAuditItems, org, id, max(after, 0), limit+1) // its error is the rows' (pgx)
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, 0, fmt.Errorf("savedsearch: baseline items: %w", err)
	}
	if len(list) > limit {
		return list[:limit], max(after, 0) + int64(limit), nil
	}
	return list, 0, nil
}

// likeEscaper escapes the LIKE wildcards of a name filter.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// savedSearchAuditList reads a page of saved-search summaries, archived
// ones too when $5, newest first, after ($2 created_at, $3 id); $6 a LIKE
// pattern on the name or NULL. $1 org, $4 limit.
const savedSearchAuditList = `
SELECT s.id, s.organization_id, s.name, coalesce(left(s.brief ->> 'query', ` + maxQueryLenSQL + `), ''), s.version,
	s.created_at, s.updated_at, s.brief_bytes, b.item_count, s.archived_at, s.created_by
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1
	AND ($5::boolean OR s.archived_at IS NULL)
	AND ($6::text IS NULL OR s.name ILIKE $6::text)
	AND (s.created_at, s.id) < (coalesce($2::timestamptz, 'infinity'),
		coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY s.created_at DESC, s.id DESC
LIMIT $4`

// savedSearchAuditGet reads one saved search, archived or not, with the
// brief whole when its stored size is at most $3 and else its query
// alone, and the baseline's size and cut cursor, never its items. $1 org,
// $2 id.
const savedSearchAuditGet = `
SELECT s.id, s.organization_id, s.name,
	CASE WHEN s.brief_bytes <= $3 THEN s.brief
		ELSE jsonb_build_object('query', coalesce(left(s.brief ->> 'query', ` + maxQueryLenSQL + `), '')) END,
	s.brief_bytes, s.version, s.created_at, s.updated_at, b.item_count, left(b.cursor, ` + maxCursorBytesSQL + `),
	s.created_by, s.archived_at
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2`

// savedSearchAuditItems reads a page of a saved search's baseline items by
// their position, after $3, at most $4, each cut to MaxItemLen characters.
// $1 org, $2 id.
const savedSearchAuditItems = `
SELECT CASE WHEN char_length(x.item) > ` + maxItemLenSQL + ` THEN left(x.item, ` + maxItemLenSQL + `) || '…' ELSE x.item END
FROM agent.saved_search_baselines b, unnest(b.items) WITH ORDINALITY x(item, pos)
WHERE b.organization_id = $1 AND b.saved_search_id = $2 AND x.pos > $3
ORDER BY x.pos
LIMIT $4`

// maxCursorBytesSQL is MaxCursorBytes for the audit read (left counts
// characters, so a cut cursor is at most four times as many bytes).
const maxCursorBytesSQL = "4096"
