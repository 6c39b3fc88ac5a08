package tools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
)

// ErrInvalidCursor reports a page cursor this package did not write.
var ErrInvalidCursor = keyset.InvalidCursor("tools")

// UncertainCall is an unresolved uncertain call, with the evidence for a
// decision.
type UncertainCall struct {
	ClaimID        uuid.UUID
	OrganizationID uuid.UUID
	Scope          string
	Key            string
	RequestHash    string // of the call's canonical input
	ClaimedAt      time.Time
	RetainUntil    time.Time
	Answer         Result
	Raw            json.RawMessage // the answer as stored
}

// PastResolution is a recorded decision.
type PastResolution struct {
	Resolved
	OrganizationID uuid.UUID
	Scope          string
	Key            string
}

// InspectDB is what [Inspector] needs; a *pgxpool.Pool has it.
type InspectDB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Inspector reads uncertain calls and their resolutions, across
// organizations unless filtered. It is safe for concurrent use.
type Inspector struct {
	db      InspectDB
	clock   *dbclock.Clock
	cursors keyset.Key
}

// NewInspector returns an inspector on db; a nil clock is the database's
// now().
func NewInspector(db InspectDB, clock *dbclock.Clock) *Inspector {
	return &Inspector{db: db, clock: clock}
}

// Cursors returns a copy of in whose lists sign their cursors with k.
func (in *Inspector) Cursors(k keyset.Key) *Inspector {
	c := *in
	c.cursors = k
	return &c
}

// InspectParams narrow and page the lists; zero filters match everything.
type InspectParams struct {
	OrganizationID uuid.UUID
	Scope          string // tool.<name>
	// Limit is 1 to 200; zero or less is 50. Cursor is "" for the first
	// page.
	Limit  int
	Cursor string
}

// Uncertain returns a page of the uncertain calls awaiting a person, the
// oldest first, and the next cursor ("" after the last page). It returns
// [ErrInvalidCursor] for a cursor it did not write.
func (in *Inspector) Uncertain(ctx context.Context, p InspectParams) ([]UncertainCall, string, error) {
	return readPage(ctx, in, keyset.List{Name: "tools.uncertain"}, "uncertain calls", uncertainPage, []any{in.clock.Arg()}, p,
		func(r pgx.CollectableRow) (UncertainCall, error) {
			var (
				c          UncertainCall
				rtype, rid *string
			)
			err := r.Scan(&c.ClaimID, &c.OrganizationID, &c.Scope, &c.Key, &c.RequestHash, &rtype, &rid,
				&c.Raw, &c.ClaimedAt, &c.RetainUntil)
			if err == nil {
				c.Answer, err = DecodeAnswer(c.Raw, deref(rtype), deref(rid))
			}
			return c, err
		},
		func(c UncertainCall) keyset.Position { return keyset.Position{CreatedAt: c.ClaimedAt, ID: c.ClaimID} })
}

// Resolutions returns a page of the recorded decisions, the newest first,
// and the next cursor. It returns [ErrInvalidCursor] for a cursor it did
// not write.
func (in *Inspector) Resolutions(ctx context.Context, p InspectParams) ([]PastResolution, string, error) {
	return readPage(ctx, in, keyset.List{Name: "tools.resolutions"}, "resolutions", resolutionPage, nil, p,
		func(r pgx.CollectableRow) (PastResolution, error) {
			var (
				pr  PastResolution
				raw json.RawMessage
			)
			err := r.Scan(&pr.ID, &pr.OrganizationID, &pr.Scope, &pr.Key, &pr.ClaimID, &pr.Resolution,
				&pr.Actor, &pr.Reason, &raw, &pr.ResolvedAt)
			if err == nil {
				pr.Uncertain, err = DecodeAnswer(raw, "", "")
			}
			return pr, err
		},
		func(pr PastResolution) keyset.Position { return keyset.Position{CreatedAt: pr.ResolvedAt, ID: pr.ID} })
}

// readPage runs query, one keyset page of what, with the lead arguments,
// the cursor's position, the limit plus one, and p's filters. It returns
// [ErrInvalidCursor] for a cursor in's key did not sign for list l.
func readPage[T any](ctx context.Context, in *Inspector, l keyset.List, what, query string, lead []any, p InspectParams,
	scan pgx.RowToFunc[T], pos func(T) keyset.Position) ([]T, string, error) {
	q, err := in.cursors.Read(l, p.Cursor, p.Limit, 50, 200)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	return keyset.Query(ctx, in.db, "tools: "+what, q, scan, pos,
		query, append(lead, q.At, q.ID, q.Limit+1, sqlarg.Null(p.OrganizationID), sqlarg.Null(p.Scope))...)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// uncertainPage reads retained uncertain calls oldest first after
// ($2 claimed_at, $3 id); a NULL $5 organization or $6 scope is any.
const uncertainPage = `
SELECT k.id, k.organization_id, k.scope, k.key, k.request_hash, k.resource_type, k.resource_id,
	k.response, k.claimed_at, k.retain_until
FROM agent.idempotency_keys k, (SELECT coalesce($1::timestamptz, now()) AS now) c
WHERE k.scope LIKE 'tool.%' AND ` + callUncertain + ` AND k.retain_until > c.now
	AND ($5::uuid IS NULL OR k.organization_id = $5::uuid)
	AND ($6::text IS NULL OR k.scope = $6::text)
	AND (k.claimed_at, k.id) > (coalesce($2::timestamptz, '-infinity'),
		coalesce($3::uuid, '00000000-0000-0000-0000-000000000000'))
ORDER BY k.claimed_at, k.id
LIMIT $4`

// resolutionPage reads decisions newest first after ($1 resolved_at,
// $2 id); a NULL $4 organization or $5 scope is any.
const resolutionPage = `
SELECT r.id, r.organization_id, r.scope, r.key, r.claim_id, r.resolution, r.actor, r.reason,
	r.uncertain_answer, r.resolved_at
FROM agent.tool_call_resolutions r
WHERE ($4::uuid IS NULL OR r.organization_id = $4::uuid)
	AND ($5::text IS NULL OR r.scope = $5::text)
	AND (r.resolved_at, r.id) < (coalesce($1::timestamptz, 'infinity'),
		coalesce($2::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY r.resolved_at DESC, r.id DESC
LIMIT $3`
