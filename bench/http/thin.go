package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/runevents"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/snapshot"
)

// The statements of a saved-search start, copied as they stand in the
// packages' queries.go (runs, savedsearch, idempotency, snapshot). The thin
// handler must issue exactly what the real one issues, or the ratio compares
// two different workloads; sameSQL (main.go) refuses to measure when the real
// handler's statements differ from these, so a change to a queries.go shows
// up here as a failure to start, not as a quietly wrong figure.

// runs.runWithSnapshotByStartKey, with runs.runColumns expanded.
const thinRunWithSnapshotByStartKey = `
SELECT ` + thinRunColumns + `,
	sn.id, sn.saved_search_id, sn.saved_search_version, sn.content_hash, sn.created_at
FROM agent.runs r
LEFT JOIN agent.saved_search_snapshots sn
	ON sn.organization_id = r.organization_id AND sn.id = r.snapshot_id
WHERE r.organization_id = $1 AND r.start_key = $2
	AND r.retain_until > coalesce($3::timestamptz, now())`

// runs.runColumns.
const thinRunColumns = `r.id, r.organization_id, r.kind, r.start_key, r.request_hash,
	r.saved_search_id, r.snapshot_id, r.name, r.status, r.options, r.input,
	r.created_by, r.created_at, r.retain_until,
	r.version, coalesce(r.updated_at, r.created_at), r.result_ref, r.error_code, r.error_message,
	r.cancel_requested_at`

// savedsearch.savedSearchExists.
const thinSavedSearchExists = `
SELECT EXISTS (
	SELECT 1 FROM agent.saved_searches s
	WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL)`

// idempotency.recordColumns.
const thinRecordColumns = `k.id, k.organization_id, k.scope, k.key, k.request_hash, k.status,
	k.lease_token, k.resource_type, k.resource_id, k.response,
	k.claimed_at, k.lease_expires_at, k.retain_until, k.waited`

// idempotency.claimInsert.
const thinClaimInsert = `
INSERT INTO agent.idempotency_keys AS k
	(id, organization_id, scope, key, request_hash, status, lease_token,
	 claimed_at, lease_expires_at, retain_until)
VALUES (@id::uuid, @org::uuid, @scope::text, @key::text, @request_hash::text, 'processing', @lease_token::uuid,
	coalesce(@now::timestamptz, now()),
	coalesce(@now::timestamptz, now()) + @lease_us::bigint * interval '1 microsecond',
	coalesce(@now::timestamptz, now()) + greatest(@lease_us::bigint, @retention_us::bigint) * interval '1 microsecond')
ON CONFLICT (organization_id, scope, key) DO NOTHING
RETURNING ` + thinRecordColumns + `, k.claimed_at`

// snapshot.savedSearchFreezeRead.
const thinSavedSearchFreezeRead = `
SELECT s.name, s.brief, s.version, b.items, b.cursor, now()
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL`

// snapshot.snapshotInsert.
const thinSnapshotInsert = `
INSERT INTO agent.saved_search_snapshots
	(id, organization_id, saved_search_id, saved_search_version, saved_search_name,
	 brief, baseline, content_hash, created_by, origin, created_at, claim_id)
VALUES (@id::uuid, @org::uuid, @saved_search_id::uuid, @version::bigint, @name::text,
	@brief::jsonb, @baseline::jsonb, @content_hash::text, @created_by::text, @origin::text, @created_at::timestamptz,
	@claim_id::uuid)`

// idempotency.claimCompleteOrAbort.
const thinClaimCompleteOrAbort = `
WITH done AS (
	UPDATE agent.idempotency_keys AS k
	SET status = 'completed', resource_type = $4, resource_id = $5, response = $6
	WHERE k.organization_id = $1 AND k.id = $2 AND k.lease_token = $3 AND k.status = 'processing'
	RETURNING k.waited)
SELECT CASE WHEN EXISTS (SELECT FROM done) THEN (SELECT d.waited FROM done d)
	ELSE agent.idempotency_fence_lost($2::uuid) END`

// runs.runInsert, runs.dispatchInsert and runs.eventInsert: the Run, then
// its outbox row (its dispatch) and its webhook deliveries, in the
// preparation's transaction.
const thinRunInsert = `
INSERT INTO agent.runs AS r
	(id, organization_id, kind, start_key, request_hash, saved_search_id, snapshot_id,
	 name, status, options, input, created_by, created_at, retain_until)
VALUES (@id::uuid, @org::uuid, @kind::text, @start_key::text, @request_hash::text,
	@saved_search_id::uuid, @snapshot_id::uuid, @name::text, 'queued', @options::jsonb,
	@input::jsonb, @created_by::text, coalesce(@now::timestamptz, now()),
	coalesce(@now::timestamptz, now()) + @retention_us::bigint * interval '1 microsecond')
ON CONFLICT (organization_id, start_key) DO NOTHING
RETURNING ` + thinRunColumns

// thinEventInsert is runs.eventInsert: the Run's webhook deliveries, one
// per enabled endpoint of the organization (none here: the benchmark's
// organizations have no endpoint, as most do not).
var thinEventInsert = runevents.Insert

const thinDispatchInsert = `
INSERT INTO agent.run_dispatches (run_id, organization_id, next_attempt_at, created_at)
SELECT r.id, r.organization_id, r.created_at, r.created_at
FROM agent.runs r
WHERE r.organization_id = @org::uuid AND r.id = @id::uuid`

// statementNames names the statements a start issues, for the report. pgx
// sends "begin" and "commit" for a transaction with default options.
var statementNames = map[string]string{
	normalizeSQL(thinRunWithSnapshotByStartKey): "runWithSnapshotByStartKey",
	normalizeSQL(thinSavedSearchExists):         "savedSearchExists",
	normalizeSQL(thinClaimInsert):               "claimInsert",
	"begin":                                     "begin",
	normalizeSQL(thinSavedSearchFreezeRead):     "savedSearchFreezeRead",
	normalizeSQL(thinSnapshotInsert):            "snapshotInsert",
	normalizeSQL(thinClaimCompleteOrAbort):      "claimCompleteOrAbort",
	"commit":                                    "commit",
	normalizeSQL(thinRunInsert):                 "runInsert",
	normalizeSQL(thinDispatchInsert):            "dispatchInsert",
	normalizeSQL(thinEventInsert):               "eventInsert",
}

// thin is the baseline: an echo handler running the start's statements
// straight through pgx. It does the same database work as the real handler
// and answers the same JSON shape, and skips everything else the real one
// does: token verification (its organization and actor are fixed), header
// and body validation, option normalization beyond the default, canonical
// JSON for the hashes, problem documents, request ids and the access log.
type thin struct {
	pool  *pgxpool.Pool
	org   uuid.UUID
	actor string
}

func (t *thin) handler() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.POST("/v1/saved-searches/:id/start", t.start)
	return e
}

type thinRun struct {
	ID              uuid.UUID       `json:"id"`
	OrganizationID  uuid.UUID       `json:"organization_id"`
	Kind            string          `json:"kind"`
	SavedSearchID   pgtype.UUID     `json:"saved_search_id"`
	SnapshotID      pgtype.UUID     `json:"snapshot_id"`
	Name            *string         `json:"name"`
	Status          string          `json:"status"`
	Options         json.RawMessage `json:"options"`
	Input           json.RawMessage `json:"input"`
	CreatedAt       time.Time       `json:"created_at"`
	RetainUntil     time.Time       `json:"retain_until"`
	Version         int64           `json:"version"`
	UpdatedAt       time.Time       `json:"updated_at"`
	ResultRef       *string         `json:"result_ref"`
	Error           *thinRunError   `json:"error"`
	CancelRequested *time.Time      `json:"cancel_requested_at"`
	errCode         *string
	errMessage      *string
	StartKey        string  `json:"-"`
	RequestHash     string  `json:"-"`
	CreatedBy       *string `json:"-"`
}

func (r *thinRun) dest() []any {
	return []any{(*[16]byte)(&r.ID), (*[16]byte)(&r.OrganizationID), &r.Kind, &r.StartKey, &r.RequestHash,
		&r.SavedSearchID, &r.SnapshotID, &r.Name, &r.Status, &r.Options, &r.Input,
		&r.CreatedBy, &r.CreatedAt, &r.RetainUntil,
		&r.Version, &r.UpdatedAt, &r.ResultRef, &r.errCode, &r.errMessage, &r.CancelRequested}
}

// thinRunError is a Run's error: null on every Run a start answers.
type thinRunError struct {
	Code    string  `json:"code"`
	Message *string `json:"message"`
}

type thinSummary struct {
	ID                 uuid.UUID `json:"id"`
	SavedSearchID      uuid.UUID `json:"saved_search_id"`
	SavedSearchVersion int64     `json:"saved_search_version"`
	ContentHash        string    `json:"content_hash"`
	CreatedAt          time.Time `json:"created_at"`
}

type thinAnswer struct {
	Run      *thinRun     `json:"run"`
	Snapshot *thinSummary `json:"snapshot"`
}

// thinRecord receives the columns of an idempotency claim, scanned as the
// plane's repository scans them.
type thinRecord struct {
	id, org, leaseToken                       uuid.UUID
	scope, key, hash, status                  string
	resourceType, resourceID                  *string
	response                                  json.RawMessage
	claimedAt, leaseExpires, retain, observed time.Time
	waited                                    bool
}

func (r *thinRecord) dest() []any {
	return []any{&r.id, &r.org, &r.scope, &r.key, &r.hash, &r.status, &r.leaseToken,
		&r.resourceType, &r.resourceID, &r.response, &r.claimedAt, &r.leaseExpires, &r.retain, &r.waited, &r.observed}
}

type thinOptions struct {
	MaxResults int    `json:"max_results"`
	Note       string `json:"note"`
}

// thinStart is what a start's request says: the saved search, the key,
// the options and the request's hash.
type thinStart struct {
	ssID          uuid.UUID
	key, startKey string
	hash          string
	opts          thinOptions
}

func (t *thin) start(c echo.Context) error {
	ctx := c.Request().Context()
	in, status := parseThinStart(c)
	if status != 0 {
		return c.NoContent(status)
	}
	if replayed, err := t.replay(c, in); replayed || err != nil {
		return err
	}
	// A new start: exists, claim, then one transaction that freezes,
	// completes and admits.
	claim, status, err := t.claim(ctx, in)
	if err != nil {
		return err
	}
	if status != 0 {
		return c.NoContent(status)
	}
	run, snap, err := t.admit(ctx, in, claim)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/runs/"+run.ID.String())
	return c.JSON(http.StatusCreated, thinAnswer{Run: run, Snapshot: &thinSummary{
		ID: snap.ID, SavedSearchID: in.ssID, SavedSearchVersion: snap.SavedSearchVersion,
		ContentHash: snap.ContentHash, CreatedAt: snap.CreatedAt}})
}

// parseThinStart reads the request: the saved search's id, the key and
// the options, and hashes them as the real handler does. A status other
// than 0 is the answer to a request it refuses.
func parseThinStart(c echo.Context) (thinStart, int) {
	var in thinStart
	var err error
	if in.ssID, err = uuid.Parse(c.Param("id")); err != nil {
		return in, http.StatusNotFound
	}
	if in.key = c.Request().Header.Get("Idempotency-Key"); in.key == "" {
		return in, http.StatusBadRequest
	}
	if c.Request().ContentLength != 0 {
		if err := json.NewDecoder(c.Request().Body).Decode(&in.opts); err != nil {
			return in, http.StatusBadRequest
		}
	}
	if in.opts.MaxResults == 0 {
		in.opts.MaxResults = admission.DefaultMaxResults
	}
	sum := sha256.Sum256([]byte(in.ssID.String() + "\n" + strconv.Itoa(in.opts.MaxResults) + "\n" + in.opts.Note))
	in.hash = hex.EncodeToString(sum[:])
	in.startKey = runs.SavedSearchStartKey(in.key)
	return in, 0
}

// replay answers a start whose Run exists, in one statement; replayed is
// false when there is none.
func (t *thin) replay(c echo.Context, in thinStart) (replayed bool, err error) {
	var (
		run                thinRun
		snapID, snapSearch pgtype.UUID
		snapVersion        *int64
		snapHash           *string
		snapCreated        *time.Time
	)
	err = t.pool.QueryRow(c.Request().Context(), thinRunWithSnapshotByStartKey, pgtype.UUID{Bytes: t.org, Valid: true}, in.startKey, nil).
		Scan(append(run.dest(), &snapID, &snapSearch, &snapVersion, &snapHash, &snapCreated)...)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return true, err
	case run.RequestHash != in.hash:
		return true, c.NoContent(http.StatusUnprocessableEntity)
	}
	var sn *thinSummary
	if snapID.Valid {
		sn = &thinSummary{ID: snapID.Bytes, SavedSearchID: snapSearch.Bytes, SavedSearchVersion: *snapVersion,
			ContentHash: *snapHash, CreatedAt: *snapCreated}
	}
	c.Response().Header().Set("Idempotent-Replayed", "true")
	return true, c.JSON(http.StatusOK, thinAnswer{Run: &run, Snapshot: sn})
}

// claim checks that the saved search exists and claims the key. A status
// other than 0 is the answer when either fails.
func (t *thin) claim(ctx context.Context, in thinStart) (thinRecord, int, error) {
	var claim thinRecord
	var live bool
	if err := t.pool.QueryRow(ctx, thinSavedSearchExists, t.org, in.ssID).Scan(&live); err != nil {
		return claim, 0, err
	}
	if !live {
		return claim, http.StatusNotFound, nil
	}
	err := t.pool.QueryRow(ctx, thinClaimInsert, pgx.StrictNamedArgs{
		"id": ids.New(), "org": t.org, "scope": idempotency.ScopeSavedSearchStart, "key": in.key, "request_hash": in.hash,
		"lease_token": uuid.New(), "lease_us": idempotency.SavedSearchStartLease.Microseconds(),
		"retention_us": idempotency.SavedSearchStartRetention.Microseconds(), "now": nil,
	}).Scan(claim.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return claim, http.StatusConflict, nil // never reached by the benchmark: every key is fresh
	}
	return claim, 0, err
}

// admit is the start's one transaction of two round trips: BEGIN and the
// freeze read, then the snapshot, the Run, the fenced completion and
// COMMIT.
func (t *thin) admit(ctx context.Context, in thinStart, claim thinRecord) (*thinRun, *thinSnapshot, error) {
	conn, err := t.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Release()
	snap, baseline, err := t.freeze(ctx, conn, in)
	if err != nil {
		return nil, nil, err
	}
	response, err := json.Marshal(struct {
		Snapshot        *thinSnapshot `json:"snapshot"`
		SavedSearchName string        `json:"saved_search_name"`
	}{snap, snap.name})
	if err != nil {
		return nil, nil, err
	}
	options, err := json.Marshal(in.opts)
	if err != nil {
		return nil, nil, err
	}
	var run thinRun
	second := &pgx.Batch{}
	second.Queue(thinSnapshotInsert, pgx.StrictNamedArgs{
		"id": snap.ID, "org": t.org, "saved_search_id": in.ssID, "version": snap.SavedSearchVersion, "name": snap.name,
		"brief": string(snap.Brief), "baseline": string(baseline), "content_hash": snap.ContentHash,
		"created_by": t.actor, "origin": snap.Origin, "created_at": snap.CreatedAt, "claim_id": claim.id,
	})
	runID := ids.New()
	second.Queue(thinRunInsert, pgx.StrictNamedArgs{
		"id": runID, "org": t.org, "kind": runs.KindSavedSearch, "start_key": in.startKey,
		"request_hash": in.hash, "saved_search_id": in.ssID, "snapshot_id": snap.ID, "name": snap.name,
		"options": string(options), "input": nil, "created_by": t.actor,
		"retention_us": runs.Retention.Microseconds(), "now": nil,
	}).
		QueryRow(func(row pgx.Row) error { return row.Scan(run.dest()...) })
	second.Queue(thinDispatchInsert, pgx.StrictNamedArgs{"id": runID, "org": t.org})
	second.Queue(thinEventInsert, pgx.StrictNamedArgs{"id": runID, "org": t.org})
	second.Queue(thinClaimCompleteOrAbort, t.org, claim.id, claim.leaseToken, admission.ResourceType, snap.ID.String(), string(response))
	second.Queue("commit")
	if err := conn.SendBatch(ctx, second).Close(); err != nil {
		if conn.Conn().PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(ctx, "rollback")
		}
		return nil, nil, fmt.Errorf("preparation: %w", err)
	}
	return &run, snap, nil
}

// freeze is the transaction's first round trip, BEGIN and the freeze
// read; it returns the snapshot with its content hash, and its baseline
// as JSON.
func (t *thin) freeze(ctx context.Context, conn *pgxpool.Conn, in thinStart) (*thinSnapshot, []byte, error) {
	snap := &thinSnapshot{ID: ids.New(), OrganizationID: t.org, SavedSearchID: in.ssID, CreatedBy: &t.actor, Origin: snapshot.OriginAPI}
	first := &pgx.Batch{}
	first.Queue("begin")
	first.Queue(thinSavedSearchFreezeRead, t.org, in.ssID).QueryRow(func(row pgx.Row) error {
		var brief []byte
		err := row.Scan(&snap.name, &brief, &snap.SavedSearchVersion, &snap.Baseline.Items, &snap.Baseline.Cursor, &snap.CreatedAt)
		snap.Brief = brief
		return err
	})
	if err := conn.SendBatch(ctx, first).Close(); err != nil {
		return nil, nil, fmt.Errorf("freeze read: %w", err)
	}
	baseline, err := json.Marshal(snap.Baseline)
	if err != nil {
		return nil, nil, err
	}
	h := sha256.New()
	h.Write(snap.Brief)
	h.Write(baseline)
	snap.ContentHash = hex.EncodeToString(h.Sum(nil))
	return snap, baseline, nil
}

// thinSnapshot is the snapshot the claim stores as its answer, the same
// fields the real handler stores.
type thinSnapshot struct {
	ID                 uuid.UUID       `json:"id"`
	OrganizationID     uuid.UUID       `json:"organization_id"`
	SavedSearchID      uuid.UUID       `json:"saved_search_id"`
	SavedSearchVersion int64           `json:"saved_search_version"`
	Brief              json.RawMessage `json:"brief"`
	Baseline           thinBaseline    `json:"baseline"`
	ContentHash        string          `json:"content_hash"`
	CreatedBy          *string         `json:"created_by"`
	Origin             string          `json:"origin"`
	CreatedAt          time.Time       `json:"created_at"`
	name               string
}

type thinBaseline struct {
	Items  []string `json:"items"`
	Cursor *string  `json:"cursor"`
}
