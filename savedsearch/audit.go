package savedsearch

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

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/keyset"
)

// The audit reads of saved searches: the console's, which see archived
// saved searches too. Every one takes the organization and reads nothing
// of another.

// Entry is a saved search as the audit sees it, archived or not.
type Entry struct {
	SavedSearch
	// CreatedBy is the actor that created it; nil when unknown.
	CreatedBy *string
	// ArchivedAt is when it was archived; nil while it is live.
	ArchivedAt *time.Time
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

// ListAll returns a page of org's saved searches, newest first, archived
// ones too when p.IncludeArchived, and the cursor of the next page ("" after
// the last). It returns [ErrInvalidCursor] for a cursor it did not write and
// an error wrapping [ErrInvalid] for a name filter over MaxNameLen.
func (s *Store) ListAll(ctx context.Context, org uuid.UUID, p AuditListParams) (_ []Entry, _ string, err error) {
	defer dberr.Annotate(&err)
	pos, err := keyset.Decode(p.Cursor)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	if utf8.RuneCountInString(p.Name) > MaxNameLen || !utf8.ValidString(p.Name) {
		return nil, "", fmt.Errorf("%w: name filter: at most %d characters of UTF-8", ErrInvalid, MaxNameLen)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	createdAt, id := keyset.Args(pos)
	var pattern any
	if p.Name != "" {
		pattern = "%" + likeEscaper.Replace(p.Name) + "%"
	}
	rows, err := s.db.Query(ctx, savedSearchAuditList, org, createdAt, id, limit+1, p.IncludeArchived, pattern)
	if err != nil {
		return nil, "", fmt.Errorf("savedsearch: list all: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		e, err := scanEntry(r)
		if err != nil {
			return Entry{}, err
		}
		return *e, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("savedsearch: list all: %w", err)
	}
	list, next := keyset.Page(list, limit, func(i int) keyset.Position {
		return keyset.Position{CreatedAt: list[i].CreatedAt, ID: list[i].ID}
	})
	return list, next, nil
}

// GetEntry returns org's saved search id, archived or not, with its current
// baseline. It returns [ErrNotFound] when org has none (another
// organization's included).
func (s *Store) GetEntry(ctx context.Context, org, id uuid.UUID) (_ *Entry, err error) {
	defer dberr.Annotate(&err)
	e, err := scanEntry(s.db.QueryRow(ctx, savedSearchAuditGet, org, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("savedsearch: get any: %w", err)
	}
	return e, nil
}

// likeEscaper escapes the LIKE wildcards of a name filter.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

func scanEntry(row pgx.Row) (*Entry, error) {
	var (
		e   Entry
		raw []byte
	)
	err := row.Scan(&e.ID, &e.OrganizationID, &e.Name, &raw, &e.Version,
		&e.CreatedAt, &e.UpdatedAt, &e.Baseline.Items, &e.Baseline.Cursor, &e.CreatedBy, &e.ArchivedAt)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &e.Brief); err != nil {
		return nil, fmt.Errorf("decode brief: %w", err)
	}
	e.Baseline.Items = items(e.Baseline.Items)
	return &e, nil
}

// savedSearchAuditList reads a page of saved searches, archived ones too
// when $5, newest first, after ($2 created_at, $3 id); $6 a LIKE pattern
// on the name or NULL. $1 org, $4 limit.
const savedSearchAuditList = `
SELECT ` + savedSearchColumns + `, s.created_by, s.archived_at
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1
	AND ($5::boolean OR s.archived_at IS NULL)
	AND ($6::text IS NULL OR s.name ILIKE $6::text)
	AND (s.created_at, s.id) < (coalesce($2::timestamptz, 'infinity'),
		coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY s.created_at DESC, s.id DESC
LIMIT $4`

// savedSearchAuditGet reads one saved search, archived or not. $1 org,
// $2 id.
const savedSearchAuditGet = `
SELECT ` + savedSearchColumns + `, s.created_by, s.archived_at
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2`
