package schedule

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/outbound"
	"github.com/searchd/searchd/internal/shardpass"
	"github.com/searchd/searchd/runs"
)

// Time comes from the database: $now (or @now) is NULL in production.

const scheduleColumns = `sc.organization_id, sc.saved_search_id, sc.interval_seconds, sc.cron, sc.time_zone,
	sc.start_at, sc.catch_up_seconds, sc.paused, sc.next_due_at, sc.version, sc.updated_by, sc.created_at,
	sc.updated_at, sc.max_results, sc.note`

// scheduleGet reads a schedule. $1 org, $2 saved_search_id.
const scheduleGet = `
SELECT ` + scheduleColumns + `
FROM agent.saved_search_schedules sc
WHERE sc.organization_id = $1 AND sc.saved_search_id = $2`

// scheduleLock reads and locks a schedule; every writer and the plan take
// it. $1 org, $2 saved_search_id.
const scheduleLock = scheduleGet + `
FOR UPDATE`

// scheduleReadState reads the clock, whether the saved search is live, and
// its latest occurrence's due time. $1 org, $2 saved_search_id, $3 now.
const scheduleReadState = `
SELECT coalesce($3::timestamptz, now()),
	EXISTS (SELECT 1 FROM agent.saved_searches s
		WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL),
	(SELECT max(o.due_at) FROM agent.schedule_occurrences o
		WHERE o.organization_id = $1 AND o.saved_search_id = $2)`

// scheduleInsert creates a schedule; no row when another writer won. Named parameters.
const scheduleInsert = `
INSERT INTO agent.saved_search_schedules AS sc
	(organization_id, saved_search_id, interval_seconds, cron, time_zone, start_at, catch_up_seconds,
	 paused, next_due_at, updated_by, created_at, updated_at, max_results, note)
VALUES (@org::uuid, @id::uuid, @interval::bigint, @cron::text, @time_zone::text, @start_at::timestamptz,
	@catch_up::bigint, @paused::boolean, @next_due_at::timestamptz, @actor::text,
	agent.clock(@now), agent.clock(@now), @max_results::integer, @note::text)
ON CONFLICT DO NOTHING
RETURNING ` + scheduleColumns

// scheduleUpdate replaces a schedule's settings and bumps its version;
// updated_by is @actor when @set_actor. Named parameters.
const scheduleUpdate = `
UPDATE agent.saved_search_schedules AS sc
SET interval_seconds = @interval::bigint, cron = @cron::text, time_zone = @time_zone::text,
	start_at = @start_at::timestamptz, catch_up_seconds = @catch_up::bigint, paused = @paused::boolean,
	next_due_at = @next_due_at::timestamptz, max_results = @max_results::integer, note = @note::text,
	updated_by = CASE WHEN @set_actor::boolean THEN @actor::text ELSE sc.updated_by END,
	version = sc.version + 1, updated_at = agent.clock(@now)
WHERE sc.organization_id = @org::uuid AND sc.saved_search_id = @id::uuid
RETURNING ` + scheduleColumns

// scheduleDelete removes a schedule; its occurrences stay. $1 org, $2 saved_search_id.
const scheduleDelete = `
DELETE FROM agent.saved_search_schedules sc WHERE sc.organization_id = $1 AND sc.saved_search_id = $2`

// savedSearchKnown reports whether org has the saved search, archived or not.
const savedSearchKnown = `
SELECT EXISTS (SELECT 1 FROM agent.saved_searches s WHERE s.organization_id = $1 AND s.id = $2)`

const occurrenceColumns = `o.id, o.saved_search_id, o.due_at, o.status, o.reason, o.run_id, o.attempts,
	o.deadline, CASE WHEN o.closed_at IS NULL THEN o.next_attempt_at END, o.created_at, o.closed_at`

// occurrenceList reads occurrences latest due first, before $3 (NULL: from
// the latest). $1 org, $2 saved_search_id, $4 limit.
const occurrenceList = `
SELECT ` + occurrenceColumns + `
FROM agent.schedule_occurrences o
WHERE o.organization_id = $1 AND o.saved_search_id = $2
	AND o.due_at < coalesce($3::timestamptz, 'infinity')
ORDER BY o.due_at DESC
LIMIT $4`

// scheduleList reads schedules newest first after ($2, $3) (NULLs: from the
// start), with saved search and latest occurrence. $1 org, $4 limit.
const scheduleList = `
SELECT ` + scheduleColumns + `, s.name, s.archived_at, ` + occurrenceColumns + `
FROM agent.saved_search_schedules sc
JOIN agent.saved_searches s ON s.organization_id = $1 AND s.id = sc.saved_search_id
LEFT JOIN LATERAL (
	SELECT * FROM agent.schedule_occurrences o
	WHERE o.organization_id = $1 AND o.saved_search_id = sc.saved_search_id
	ORDER BY o.due_at DESC
	LIMIT 1
) o ON true
WHERE sc.organization_id = $1
	AND (sc.created_at, sc.saved_search_id) < (coalesce($2::timestamptz, 'infinity'),
		coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY sc.created_at DESC, sc.saved_search_id DESC
LIMIT $4`

// The drain serves organizations in turn: rows are ranked per organization
// (the distribution column, so Citus ranks per shard) and taken by rank,
// then time, so one organization cannot delay another.

// scheduleCreateLock serializes org $1's creates until commit, so count and
// insert are one step.
const scheduleCreateLock = `SELECT pg_advisory_xact_lock(hashtextextended('searchd.schedules:' || $1::text, 0))`

const scheduleCount = `SELECT count(*) FROM agent.saved_search_schedules WHERE organization_id = $1`

// scheduleDue finds due schedules, by turn, without a lock.
const scheduleDue = `
SELECT d.org::text
FROM (SELECT sc.organization_id AS org, sc.next_due_at AS at,
		row_number() OVER (PARTITION BY sc.organization_id ORDER BY sc.next_due_at, sc.saved_search_id) AS turn
	FROM agent.saved_search_schedules sc
	WHERE sc.next_due_at <= agent.clock(@now)) d
ORDER BY d.turn, d.at
LIMIT @limit`

// planRead reads and locks at most @limit due schedules of a shard (@keys;
// all with @all), by turn, with the archive state and the plan's clock. SKIP
// LOCKED leaves schedules being changed to their owner.
const planRead = `
SELECT agent.clock(@now), sc.organization_id, sc.saved_search_id, sc.interval_seconds,
	coalesce(sc.cron, ''), sc.time_zone, sc.start_at, sc.catch_up_seconds, sc.next_due_at,
	s.archived_at IS NOT NULL, sc.max_results, sc.note
FROM (SELECT r.organization_id, r.saved_search_id, r.next_due_at,
		row_number() OVER (PARTITION BY r.organization_id ORDER BY r.next_due_at, r.saved_search_id) AS turn
	FROM agent.saved_search_schedules r
	WHERE (@all::boolean OR r.organization_id = ANY(@keys::uuid[]))
		AND r.next_due_at <= agent.clock(@now)) d
JOIN agent.saved_search_schedules sc ON sc.organization_id = d.organization_id AND sc.saved_search_id = d.saved_search_id
JOIN agent.saved_searches s ON s.organization_id = sc.organization_id AND s.id = sc.saved_search_id
WHERE (@all::boolean OR sc.organization_id = ANY(@keys::uuid[]))
	AND (@all::boolean OR s.organization_id = ANY(@keys::uuid[]))
	AND sc.next_due_at <= agent.clock(@now)
ORDER BY d.turn, d.next_due_at
LIMIT @limit
FOR UPDATE OF sc SKIP LOCKED`

// planInsert writes due occurrences from parallel arrays at $1 (the plan's
// clock): $2 org, $3 saved_search_id, $4 due_at, $5 deadline, $7
// max_results, $8 note; one past its deadline is written missed, kept $6 µs.
// Existing ones are skipped. It returns each status.
const planInsert = `
INSERT INTO agent.schedule_occurrences AS o
	(organization_id, saved_search_id, due_at, id, status, deadline, next_attempt_at, created_at,
	 closed_at, retain_until, max_results, note)
SELECT v.org, v.saved_search_id, v.due_at, gen_random_uuid(),
	CASE WHEN v.deadline < $1::timestamptz THEN 'missed' ELSE 'pending' END,
	v.deadline, v.due_at, $1::timestamptz,
	CASE WHEN v.deadline < $1::timestamptz THEN $1::timestamptz END,
	CASE WHEN v.deadline < $1::timestamptz THEN $1::timestamptz + $6::bigint * interval '1 microsecond' END,
	v.max_results, v.note
FROM unnest($2::uuid[], $3::uuid[], $4::timestamptz[], $5::timestamptz[], $7::integer[], $8::text[])
	AS v(org, saved_search_id, due_at, deadline, max_results, note)
ON CONFLICT DO NOTHING
RETURNING o.status`

// planAdvance sets next_due_at of planned schedules from parallel arrays:
// $1 org, $2 saved_search_id, $3 next_due_at (NULL: never again).
const planAdvance = `
UPDATE agent.saved_search_schedules AS sc SET next_due_at = v.next_due_at
FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS v(org, saved_search_id, next_due_at)
WHERE sc.organization_id = ANY($1::uuid[])
	AND sc.organization_id = v.org AND sc.saved_search_id = v.saved_search_id`

// occurrenceDue finds due open occurrences, by turn, without a lock.
const occurrenceDue = `
SELECT d.org::text
FROM (SELECT o.organization_id AS org, o.next_attempt_at AS at,
		row_number() OVER (PARTITION BY o.organization_id ORDER BY o.next_attempt_at, o.saved_search_id, o.due_at) AS turn
	FROM agent.schedule_occurrences o
	WHERE o.closed_at IS NULL AND o.next_attempt_at <= agent.clock(@now)) d
ORDER BY d.turn, d.at
LIMIT @limit`

// occurrenceTake takes at most @limit due open occurrences of a shard (@keys;
// all with @all), by turn, FOR UPDATE SKIP LOCKED: one past its deadline and
// never attempted is closed missed, the rest leased under @token until
// @lease_end. It returns each with whether it is late (an attempted late one
// may have admitted its Run), its schedule's state and actor. Clock-derived
// times are parameters because Citus refuses them in a modifying CASE.
const occurrenceTake = `
WITH due AS (
	SELECT o.organization_id, o.saved_search_id, o.due_at,
		o.deadline < @clock::timestamptz AS late,
		o.deadline < @clock::timestamptz AND o.attempts = 0 AS missed
	FROM (SELECT r.organization_id, r.saved_search_id, r.due_at, r.next_attempt_at,
			row_number() OVER (PARTITION BY r.organization_id ORDER BY r.next_attempt_at, r.saved_search_id, r.due_at) AS turn
		FROM agent.schedule_occurrences r
		WHERE (@all::boolean OR r.organization_id = ANY(@keys::uuid[]))
			AND r.closed_at IS NULL AND r.next_attempt_at <= @clock::timestamptz) d
	JOIN agent.schedule_occurrences o
		ON o.organization_id = d.organization_id AND o.saved_search_id = d.saved_search_id AND o.due_at = d.due_at
	WHERE (@all::boolean OR o.organization_id = ANY(@keys::uuid[]))
		AND o.closed_at IS NULL AND o.next_attempt_at <= @clock::timestamptz
	ORDER BY d.turn, d.next_attempt_at
	LIMIT @limit
	FOR UPDATE OF o SKIP LOCKED
), taken AS (
	UPDATE agent.schedule_occurrences AS o
	SET status = CASE WHEN due.missed THEN 'missed' ELSE o.status END,
		reason = CASE WHEN due.missed THEN NULL ELSE o.reason END,
		attempts = o.attempts + CASE WHEN due.late THEN 0 ELSE 1 END,
		lease_token = CASE WHEN due.missed THEN NULL ELSE @token::uuid END,
		next_attempt_at = CASE WHEN due.missed THEN o.next_attempt_at
			ELSE @lease_end::timestamptz END,
		closed_at = CASE WHEN due.missed THEN @clock::timestamptz END,
		retain_until = CASE WHEN due.missed THEN @retain_end::timestamptz END
	FROM due
	WHERE (@all::boolean OR o.organization_id = ANY(@keys::uuid[]))
		AND o.organization_id = due.organization_id AND o.saved_search_id = due.saved_search_id
		AND o.due_at = due.due_at
	RETURNING o.organization_id, o.saved_search_id, o.due_at, o.id, o.status, o.attempts, due.late,
		o.max_results, o.note
)
SELECT t.organization_id, t.saved_search_id, t.due_at, t.id, t.status, t.attempts, t.late,
	sc.saved_search_id IS NOT NULL, coalesce(sc.paused, false), sc.updated_by, t.max_results, t.note
FROM taken t
LEFT JOIN agent.saved_search_schedules sc
	ON (@all::boolean OR sc.organization_id = ANY(@keys::uuid[]))
	AND sc.organization_id = t.organization_id AND sc.saved_search_id = t.saved_search_id`

// occurrenceRecordRetry, occurrenceRecordClose and occurrenceRecordStarted
// record an attempt's outcome, fenced by the lease token: open for @retry
// µs, or closed and kept @run_retain_until or @retention µs. Three
// statements, since Citus refuses a clock in a modifying CASE.
const occurrenceRecordRetry = `
UPDATE agent.schedule_occurrences AS o
SET status = @status::text, reason = @reason::text, run_id = NULL, lease_token = NULL,
	last_error = coalesce(@last_error::text, o.last_error),
	next_attempt_at = agent.clock(@now) + @retry::bigint * interval '1 microsecond'
` + occurrenceFenced

const occurrenceRecordClose = `
UPDATE agent.schedule_occurrences AS o
SET status = @status::text, reason = @reason::text, run_id = NULL, lease_token = NULL,
	last_error = coalesce(@last_error::text, o.last_error),
	closed_at = agent.clock(@now), retain_until = agent.clock(@now) + @retention::bigint * interval '1 microsecond'
` + occurrenceFenced

const occurrenceRecordStarted = `
UPDATE agent.schedule_occurrences AS o
SET status = @status::text, reason = @reason::text, run_id = @run_id::uuid, lease_token = NULL,
	last_error = coalesce(@last_error::text, o.last_error),
	closed_at = agent.clock(@now), retain_until = @run_retain_until::timestamptz
` + occurrenceFenced

// occurrenceFenced selects an occurrence still open under @token.
const occurrenceFenced = `
WHERE o.organization_id = @org::uuid AND o.saved_search_id = @saved_search_id::uuid AND o.due_at = @due_at::timestamptz
	AND o.lease_token = @token::uuid AND o.closed_at IS NULL`

// drainStats counts due open occurrences, up to drainStatsCap, and the lag
// in seconds (0 when nothing is due). $1 now.
const drainStats = `
SELECT (SELECT count(*) FROM (SELECT 1 FROM agent.schedule_occurrences o
		WHERE o.closed_at IS NULL AND o.next_attempt_at <= coalesce($1::timestamptz, now())
		LIMIT ` + drainStatsCap + `) AS due),
	coalesce(extract(epoch FROM coalesce($1::timestamptz, now()) - least(
		(SELECT min(o.next_attempt_at) FROM agent.schedule_occurrences o WHERE o.closed_at IS NULL),
		(SELECT min(sc.next_due_at) FROM agent.saved_search_schedules sc WHERE sc.next_due_at IS NOT NULL))), 0)::float8`

const drainStatsCap = "100000"

type passParams struct {
	now        any // the database clock's argument
	bound      int
	lease      time.Duration
	token      uuid.UUID
	retention  time.Duration
	maxPlanned int
}

// The drain's two passes (internal/shardpass): what came due is read first,
// without a lock, oldest first and bounded; then each shard holding some is
// planned or taken from in its own statement or transaction, routed to that
// shard (where row locks can be taken). On PostgreSQL each pass is one step.
var (
	planPass = shardpass.New("agent.saved_search_schedules", scheduleDue)
	takePass = shardpass.New("agent.schedule_occurrences", occurrenceDue)
)

// plan locks at most bound due schedules, writes up to maxPlanned
// occurrences each and moves next_due_at, one transaction per shard; a
// failing shard does not stop the others.
func plan(ctx context.Context, db *pgxpool.Pool, p passParams) (planned, plannedMissed int, err error) {
	err = planPass.Run(ctx, db, p.bound, pgx.NamedArgs{"now": p.now}, func(ctx context.Context, g shardpass.Group) error {
		n, missed, err := planShard(ctx, db, p, g)
		planned, plannedMissed = planned+n, plannedMissed+missed
		return err
	})
	if err != nil {
		return planned, plannedMissed, fmt.Errorf("plan: %w", err)
	}
	return planned, plannedMissed, nil
}

// planRow is a schedule as planRead reads it, with the plan's clock.
type planRow struct {
	Now        time.Time
	Org, ID    uuid.UUID
	Interval   *int64
	Expr, Zone string
	Start      time.Time
	CatchUp    int64
	Next       time.Time
	Archived   bool
	MaxResults int
	Note       string
}

// dues returns r's occurrences from next_due_at to now (at most most) and
// the new next_due_at, nil when it will not come due again.
func (r planRow) dues(most int) (dues []time.Time, next *time.Time) {
	c, cerr := newCadence(r.Interval, &r.Expr, r.Zone, r.Start)
	d := r.Next
	for len(dues) < most && !d.After(r.Now) {
		dues = append(dues, d)
		if r.Archived || cerr != nil {
			// An archived saved search comes due once more, so the end is
			// on record (the start refuses it), and never again.
			return dues, nil
		}
		var ok bool
		if d, ok = c.after(d); !ok {
			return dues, nil
		}
	}
	return dues, &d
}

// planShard plans one group's schedules in one transaction.
func planShard(ctx context.Context, db *pgxpool.Pool, p passParams, g shardpass.Group) (planned, plannedMissed int, err error) {
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		planned, plannedMissed = 0, 0
		rows, _ := tx.Query(ctx, planRead, g.Args(pgx.NamedArgs{"now": p.now}))
		schedules, err := pgx.CollectRows(rows, pgx.RowToStructByPos[planRow])
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if len(schedules) == 0 {
			return nil
		}
		var (
			orgs, ids, advOrgs, advID []uuid.UUID
			dues, deadlines, nexts    []*time.Time
			maxResults                []int
			notes                     []string
		)
		for _, sc := range schedules {
			ds, next := sc.dues(p.maxPlanned)
			for _, due := range ds {
				deadline := due.Add(time.Duration(sc.CatchUp) * time.Second)
				orgs, ids, dues, deadlines = append(orgs, sc.Org), append(ids, sc.ID), append(dues, &due), append(deadlines, &deadline)
				maxResults, notes = append(maxResults, sc.MaxResults), append(notes, sc.Note)
			}
			advOrgs, advID, nexts = append(advOrgs, sc.Org), append(advID, sc.ID), append(nexts, next)
		}
		now := schedules[len(schedules)-1].Now
		b := &pgx.Batch{}
		var status string
		b.Queue(planInsert, now, orgs, ids, dues, deadlines, p.retention.Microseconds(), maxResults, notes).Query(func(rows pgx.Rows) error {
			_, err := pgx.ForEachRow(rows, []any{&status}, func() error {
				planned++
				if status == StatusMissed {
					plannedMissed++
				}
				return nil
			})
			return err
		})
		b.Queue(planAdvance, advOrgs, advID, nexts)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return nil
	})
	return planned, plannedMissed, err
}

// take runs occurrenceTake once per shard.
func take(ctx context.Context, db *pgxpool.Pool, p passParams) ([]taken, error) {
	clock, err := shardpass.Clock(ctx, db, p.now)
	if err != nil {
		return nil, fmt.Errorf("take: read the clock: %w", err)
	}
	all, err := outbound.Lease(ctx, db, takePass, p.bound, clock, p.lease, occurrenceTake,
		pgx.NamedArgs{"token": p.token, "retain_end": clock.Add(p.retention)}, func(r pgx.CollectableRow) (taken, error) {
			var t taken
			err := r.Scan(&t.org, &t.savedSearchID, &t.dueAt, nil, &t.status, nil, &t.late, &t.hasSchedule,
				&t.paused, &t.actor, &t.options.MaxResults, &t.options.Note)
			t.dueAt = t.dueAt.UTC()
			return t, err
		})
	if err != nil {
		return all, fmt.Errorf("take: %w", err)
	}
	return all, nil
}

// record records out for o under token; errFenceLost when another drain
// took the occurrence over.
func (d *Drain) record(ctx context.Context, o taken, token uuid.UUID, out outcome) error {
	var reason any
	if out.reason != "" {
		reason = out.reason
	}
	args := pgx.StrictNamedArgs{
		"org": o.org, "saved_search_id": o.savedSearchID, "due_at": o.dueAt, "token": token,
		"status": out.status, "reason": reason, "last_error": out.lastError, "now": d.cfg.Clock.Arg(),
	}
	var record string
	switch {
	case out.status == StatusNotReady:
		retry := d.cfg.RetryAfter
		if out.reason == ReasonBusy {
			// Refused a seat: tried again at the next tick.
			retry = max(min(d.cfg.Interval, retry), MinRetryAfter)
		}
		record, args["retry"] = occurrenceRecordRetry, retry.Microseconds()
	case out.runID != nil && out.retainUntil != nil:
		record, args["run_id"], args["run_retain_until"] = occurrenceRecordStarted, out.runID, out.retainUntil
	default:
		record, args["retention"] = occurrenceRecordClose, runs.Retention.Microseconds()
	}
	tag, err := d.db.Exec(ctx, record, args)
	if err == nil && tag.RowsAffected() != 1 {
		return errFenceLost
	}
	return err
}
