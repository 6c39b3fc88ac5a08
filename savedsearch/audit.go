package savedsearch

import (
	"context"
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

// The console's audit reads include archived saved searches; every answer
// is bounded in size.

// AuditBriefBytes is the largest brief, as JSON text, [Store.GetEntry]
// reads whole: twice MaxBriefBytes, since jsonb text adds spaces. A larger
// (older) brief is read as its query alone.
const AuditBriefBytes = 2 * MaxBriefBytes

const maxItemLenSQL = "200"

// Entry is a saved search, archived or not, without its baseline items.
type Entry struct {
	ID             uuid.UUID
	OrganizationID uuid.UUID
	Name           string
	// Brief is the whole brief, or only its query (cut to MaxQueryLen) when
	// [Entry.BriefCut].
	Brief      Brief
	BriefBytes int64
	Version    int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// BaselineCursor is cut to MaxCursorBytes.
	BaselineItems  int64
	BaselineCursor *string
	// CreatedBy is nil when unknown.
	CreatedBy *string
	// ArchivedAt is nil while live.
	ArchivedAt *time.Time
}

// BriefCut reports whether Brief holds only the query.
func (e *Entry) BriefCut() bool { return e.BriefBytes > AuditBriefBytes }

// AuditSummary is a [Summary] with its creator.
type AuditSummary struct {
	Summary
	// CreatedBy is nil when unknown.
	CreatedBy *string
}

// AuditListParams are the inputs of [Store.ListAll].
type AuditListParams struct {
	// Name keeps names containing it, ignoring case; at most MaxNameLen.
	Name            string
	IncludeArchived bool
	// Limit and Cursor are as in [ListParams].
	Limit  int
	Cursor string
}

// ListAll returns a page of org's saved-search summaries, newest first, and
// the next cursor ("" after the last), or [ErrInvalidCursor], or an error
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
// baseline items, or [ErrNotFound].
func (s *Store) GetEntry(ctx context.Context, org, id uuid.UUID) (_ *Entry, err error) {
	defer dberr.Annotate(&err)
	var e Entry
	err = s.db.QueryRow(ctx, savedSearchAuditGet, org, id, AuditBriefBytes).Scan(&e.ID, &e.OrganizationID, &e.Name,
		&e.Brief, &e.BriefBytes, &e.Version, &e.CreatedAt, &e.UpdatedAt, &e.BaselineItems, &e.BaselineCursor,
		&e.CreatedBy, &e.ArchivedAt)
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "savedsearch: get any")
	}
	return &e, nil
}

// BaselineItems returns up to limit (1 to MaxListLimit) baseline items after
// position after, each cut to MaxItemLen (ending in "…"), and the next
// position, 0 on the last page. An unknown saved search has no items.
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

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// savedSearchAuditList: $1 org, $2 created_at, $3 id (the cursor), $4 limit,
// $5 include archived, $6 LIKE pattern or NULL.
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

// savedSearchAuditGet reads a saved search, archived or not, its brief whole
// if at most $3 bytes (else its query). $1 org, $2 id.
const savedSearchAuditGet = `
SELECT s.id, s.organization_id, s.name,
	CASE WHEN s.brief_bytes <= $3 THEN s.brief
		ELSE jsonb_build_object('query', coalesce(left(s.brief ->> 'query', ` + maxQueryLenSQL + `), '')) END,
	s.brief_bytes, s.version, s.created_at, s.updated_at, b.item_count, left(b.cursor, ` + maxCursorBytesSQL + `),
	s.created_by, s.archived_at
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2`

// savedSearchAuditItems reads items after position $3, at most $4. $1 org, $2 id.
const savedSearchAuditItems = `
SELECT CASE WHEN char_length(x.item) > ` + maxItemLenSQL + ` THEN left(x.item, ` + maxItemLenSQL + `) || '…' ELSE x.item END
FROM agent.saved_search_baselines b, unnest(b.items) WITH ORDINALITY x(item, pos)
WHERE b.organization_id = $1 AND b.saved_search_id = $2 AND x.pos > $3
ORDER BY x.pos
LIMIT $4`

// maxCursorBytesSQL is MaxCursorBytes in characters (left counts characters).
const maxCursorBytesSQL = "4096"
