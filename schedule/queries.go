package schedule

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The SQL of schedules and occurrences, in one place. Time comes from the
// database: $now (or @now) is NULL in production, the stub in tests.

const scheduleColumns = `sc.organization_id, sc.saved_search_id, sc.interval_seconds, sc.cron, sc.time_zone,
	sc.start_at, sc.catch_up_seconds, sc.paused, sc.next_due_at, sc.version, sc.updated_by, sc.created_at,
	sc.updated_at`

// scheduleGet reads a schedule. $1 org, $2 saved_search_id.
const scheduleGet = `
SELECT ` + scheduleColumns + `
FROM agent.saved_search_schedules sc
WHERE sc.organization_id = $1 AND sc.saved_search_id = $2`

// scheduleLock reads a schedule and locks it for a change: every writer
// and the drain's plan take this lock, so they never interleave on one
// schedule. $1 org, $2 saved_search_id.
const scheduleLock = scheduleGet + `
FOR UPDATE`

// scheduleReadState reads what a change decides by: the database clock,
// whether the saved search is live, and the latest due time of its
// occurrences (by the primary key). $1 org, $2 saved_search_id, $3 now.
const scheduleReadState = `
SELECT coalesce($3::timestamptz, now()),
	EXISTS (SELECT 1 FROM agent.saved_searches s
		WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL),
	(SELECT max(o.due_at) FROM agent.schedule_occurrences o
		WHERE o.organization_id = $1 AND o.saved_search_id = $2)`

// scheduleInsert creates a schedule; it returns no row when another writer
// created it first (the caller then changes theirs). Named parameters.
const scheduleInsert = `
INSERT INTO agent.saved_search_schedules AS sc
	(organization_id, saved_search_id, interval_seconds, cron, time_zone, start_at, catch_up_seconds,
	 paused, next_due_at, updated_by, created_at, updated_at)
VALUES (@org::uuid, @id::uuid, @interval::bigint, @cron::text, @time_zone::text, @start_at::timestamptz,
	@catch_up::bigint, @paused::boolean, @next_due_at::timestamptz, @actor::text,
	coalesce(@now::timestamptz, now()), coalesce(@now::timestamptz, now()))
ON CONFLICT DO NOTHING
RETURNING ` + scheduleColumns

// scheduleUpdate replaces a locked schedule's settings and bumps its
// version. updated_by is @actor when @set_actor, else kept. Named
// parameters.
const scheduleUpdate = `
UPDATE agent.saved_search_schedules AS sc
SET interval_seconds = @interval::bigint, cron = @cron::text, time_zone = @time_zone::text,
	start_at = @start_at::timestamptz, catch_up_seconds = @catch_up::bigint, paused = @paused::boolean,
	next_due_at = @next_due_at::timestamptz,
	updated_by = CASE WHEN @set_actor::boolean THEN @actor::text ELSE sc.updated_by END,
	version = sc.version + 1, updated_at = coalesce(@now::timestamptz, now())
WHERE sc.organization_id = @org::uuid AND sc.saved_search_id = @id::uuid
RETURNING ` + scheduleColumns

// scheduleDelete removes a schedule; its occurrences stay. $1 org, $2
// saved_search_id.
const scheduleDelete = `
DELETE FROM agent.saved_search_schedules sc WHERE sc.organization_id = $1 AND sc.saved_search_id = $2`

// savedSearchKnown reports whether org has the saved search, archived or
// not: its occurrences outlive the archive. $1 org, $2 id.
const savedSearchKnown = `
SELECT EXISTS (SELECT 1 FROM agent.saved_searches s WHERE s.organization_id = $1 AND s.id = $2)`

const occurrenceColumns = `o.id, o.saved_search_id, o.due_at, o.status, o.reason, o.run_id, o.attempts,
	o.deadline, CASE WHEN o.closed_at IS NULL THEN o.next_attempt_at END, o.created_at, o.closed_at`

// occurrenceList reads a page of a saved search's occurrences, latest due
// first, before $3 (NULL: from the latest), by the primary key. $1 org,
// $2 saved_search_id, $4 limit.
const occurrenceList = `
SELECT ` + occurrenceColumns + `
FROM agent.schedule_occurrences o
WHERE o.organization_id = $1 AND o.saved_search_id = $2
	AND o.due_at < coalesce($3::timestamptz, 'infinity')
ORDER BY o.due_at DESC
LIMIT $4`

// planRead reads and locks at most $2 schedules that came due (paused
// ones have no next_due_at), earliest first, with whether their saved
// search is archived and the clock every write of the plan uses. SKIP
// LOCKED: a schedule another drain plans, or a writer changes, is left to
// them. $1 now.
const planRead = `
SELECT coalesce($1::timestamptz, now()), sc.organization_id, sc.saved_search_id, sc.interval_seconds,
	coalesce(sc.cron, ''), sc.time_zone, sc.start_at, sc.catch_up_seconds, sc.next_due_at,
	s.archived_at IS NOT NULL
FROM agent.saved_search_schedules sc
JOIN agent.saved_searches s ON s.organization_id = sc.organization_id AND s.id = sc.saved_search_id
WHERE sc.next_due_at <= coalesce($1::timestamptz, now())
ORDER BY sc.next_due_at
LIMIT $2
FOR UPDATE OF sc SKIP LOCKED`

// planInsert writes the occurrences that came due, from parallel arrays
// ($2 org, $3 saved_search_id, $4 due_at, $5 deadline), at $1 (the plan's
// clock). One already due past its deadline is written missed: closed,
// never started, kept $6 µs like a Run. The natural key decides: an
// occurrence written already is not written again. It returns the status
// of each row written.
const planInsert = `
INSERT INTO agent.schedule_occurrences AS o
	(organization_id, saved_search_id, due_at, id, status, deadline, next_attempt_at, created_at,
	 closed_at, retain_until)
SELECT v.org, v.saved_search_id, v.due_at, gen_random_uuid(),
	CASE WHEN v.deadline < $1::timestamptz THEN 'missed' ELSE 'pending' END,
	v.deadline, v.due_at, $1::timestamptz,
	CASE WHEN v.deadline < $1::timestamptz THEN $1::timestamptz END,
	CASE WHEN v.deadline < $1::timestamptz THEN $1::timestamptz + $6::bigint * interval '1 microsecond' END
FROM unnest($2::uuid[], $3::uuid[], $4::timestamptz[], $5::timestamptz[]) AS v(org, saved_search_id, due_at, deadline)
ON CONFLICT DO NOTHING
RETURNING o.status`

// planAdvance moves each planned schedule's next_due_at, from parallel
// arrays ($1 org, $2 saved_search_id, $3 next_due_at, NULL when it will
// not come due again).
const planAdvance = `
UPDATE agent.saved_search_schedules AS sc SET next_due_at = v.next_due_at
FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS v(org, saved_search_id, next_due_at)
WHERE sc.organization_id = v.org AND sc.saved_search_id = v.saved_search_id`

// occurrenceTake takes at most @bound open occurrences whose next attempt
// has come, earliest first, with FOR UPDATE SKIP LOCKED: replicas take
// disjoint rows and never wait on each other. One past its deadline and
// never attempted is closed as missed: it has no Run, since only its
// start could have made one. Every other is leased: @token fences its
// outcome and next_attempt_at is the end of the lease, after which
// another drain takes it over. It returns each with whether it is late
// (past its deadline: an attempted one may have admitted its Run before
// its drain died, which the caller looks up instead of starting it), its
// schedule's state (none when removed) and actor.
const occurrenceTake = `
WITH due AS (
	SELECT o.organization_id, o.saved_search_id, o.due_at,
		o.deadline < coalesce(@now::timestamptz, now()) AS late,
		o.deadline < coalesce(@now::timestamptz, now()) AND o.attempts = 0 AS missed
	FROM agent.schedule_occurrences o
	WHERE o.closed_at IS NULL AND o.next_attempt_at <= coalesce(@now::timestamptz, now())
	ORDER BY o.next_attempt_at
	LIMIT @bound
	FOR UPDATE SKIP LOCKED
), taken AS (
	UPDATE agent.schedule_occurrences AS o
	SET status = CASE WHEN due.missed THEN 'missed' ELSE o.status END,
		reason = CASE WHEN due.missed THEN NULL ELSE o.reason END,
		attempts = o.attempts + CASE WHEN due.late THEN 0 ELSE 1 END,
		lease_token = CASE WHEN due.missed THEN NULL ELSE @token::uuid END,
		next_attempt_at = CASE WHEN due.missed THEN o.next_attempt_at
			ELSE coalesce(@now::timestamptz, now()) + @lease::bigint * interval '1 microsecond' END,
		closed_at = CASE WHEN due.missed THEN coalesce(@now::timestamptz, now()) END,
		retain_until = CASE WHEN due.missed
			THEN coalesce(@now::timestamptz, now()) + @retention::bigint * interval '1 microsecond' END
	FROM due
	WHERE o.organization_id = due.organization_id AND o.saved_search_id = due.saved_search_id
		AND o.due_at = due.due_at
	RETURNING o.organization_id, o.saved_search_id, o.due_at, o.id, o.status, o.attempts, due.late
)
SELECT t.organization_id, t.saved_search_id, t.due_at, t.id, t.status, t.attempts, t.late,
	sc.saved_search_id IS NOT NULL, coalesce(sc.paused, false), sc.updated_by
FROM taken t
LEFT JOIN agent.saved_search_schedules sc
	ON sc.organization_id = t.organization_id AND sc.saved_search_id = t.saved_search_id`

// occurrenceRecord records the outcome of an attempt, fenced by the lease
// token: a drain whose lease passed, and whose occurrence another drain
// took over, changes nothing. not_ready stays open until @retry µs from
// now; every other status closes it, kept as long as its Run
// (@run_retain_until) or, with none, @retention µs.
const occurrenceRecord = `
UPDATE agent.schedule_occurrences AS o
SET status = @status::text, reason = @reason::text, run_id = @run_id::uuid, lease_token = NULL,
	last_error = coalesce(@last_error::text, o.last_error),
	next_attempt_at = CASE WHEN @status::text = 'not_ready'
		THEN coalesce(@now::timestamptz, now()) + @retry::bigint * interval '1 microsecond'
		ELSE o.next_attempt_at END,
	closed_at = CASE WHEN @status::text = 'not_ready' THEN NULL ELSE coalesce(@now::timestamptz, now()) END,
	retain_until = CASE WHEN @status::text = 'not_ready' THEN NULL
		ELSE coalesce(@run_retain_until::timestamptz,
			coalesce(@now::timestamptz, now()) + @retention::bigint * interval '1 microsecond') END
WHERE o.organization_id = @org::uuid AND o.saved_search_id = @saved_search_id::uuid AND o.due_at = @due_at::timestamptz
	AND o.lease_token = @token::uuid AND o.closed_at IS NULL`

// drainStats counts the open occurrences due now, up to drainStatsCap
// (a backlog larger than that is counted as the cap: a tick's stats read
// must stay cheap), and reads the drain's lag in seconds: now less the
// oldest of the earliest next attempt of an open occurrence and the
// earliest next_due_at of a schedule (NULL, so 0, when there is neither).
// Each walks an index from its start. $1 now.
const drainStats = `
SELECT (SELECT count(*) FROM (SELECT 1 FROM agent.schedule_occurrences o
		WHERE o.closed_at IS NULL AND o.next_attempt_at <= coalesce($1::timestamptz, now())
		LIMIT ` + drainStatsCap + `) AS due),
	coalesce(extract(epoch FROM coalesce($1::timestamptz, now()) - least(
		(SELECT min(o.next_attempt_at) FROM agent.schedule_occurrences o WHERE o.closed_at IS NULL),
		(SELECT min(sc.next_due_at) FROM agent.saved_search_schedules sc WHERE sc.next_due_at IS NOT NULL))), 0)::float8`

// drainStatsCap bounds the count of drainStats.
const drainStatsCap = "100000"

// passParams are the inputs of boundedPass.
type passParams struct {
	now        any // the database clock's argument
	bound      int
	lease      time.Duration
	token      uuid.UUID
	retention  time.Duration
	maxPlanned int
}

// passResult is what boundedPass did.
type passResult struct {
	planned, plannedMissed int
	taken                  []taken
}

// boundedPass is the drain's bounded pass over the database, in two
// statements' worth of work that each touch at most bound rows of their
// table: it plans (in one transaction, the schedules that came due, at
// most bound of them and maxPlanned occurrences each, are locked with
// SKIP LOCKED, their occurrences written and their next_due_at moved on),
// then takes at most bound open occurrences (occurrenceTake). It is one
// function so that a runner that routes background passes (per shard, on
// a distributed database) can run it where the rows are.
func boundedPass(ctx context.Context, db *pgxpool.Pool, p passParams) (passResult, error) {
	res, err := plan(ctx, db, p)
	if err != nil {
		return res, err
	}
	res.taken, err = take(ctx, db, p)
	return res, err
}

// plan is boundedPass's first half: it writes the occurrences that came
// due and moves their schedules on.
func plan(ctx context.Context, db *pgxpool.Pool, p passParams) (passResult, error) {
	var res passResult
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, planRead, p.now, p.bound)
		if err != nil {
			return fmt.Errorf("plan: read: %w", err)
		}
		var (
			now                       time.Time
			orgs, ids, advOrgs, advID []uuid.UUID
			dues, deadlines, nexts    []*time.Time
		)
		for rows.Next() {
			var (
				org, id  uuid.UUID
				interval *int64
				expr, tz string
				start    time.Time
				catchUp  int64
				next     time.Time
				archived bool
			)
			if err := rows.Scan(&now, &org, &id, &interval, &expr, &tz, &start, &catchUp, &next, &archived); err != nil {
				rows.Close()
				return fmt.Errorf("plan: read: %w", err)
			}
			var iv time.Duration
			if interval != nil {
				iv = time.Duration(*interval) * time.Second
			}
			// Every occurrence from next_due_at to now, at most maxPlanned;
			// the new next_due_at is the first one left, nil when the
			// schedule will not come due again.
			c, cerr := newCadence(iv, expr, tz, start)
			d, ended := next, false
			for n := 0; n < p.maxPlanned && !d.After(now); n++ {
				due, deadline := d, d.Add(time.Duration(catchUp)*time.Second)
				orgs, ids, dues, deadlines = append(orgs, org), append(ids, id), append(dues, &due), append(deadlines, &deadline)
				if archived || cerr != nil {
					// An archived saved search comes due once more, so its
					// schedule's end is on record (the start refuses it),
					// and never again.
					ended = true
					break
				}
				var ok bool
				if d, ok = c.after(d); !ok {
					ended = true
					break
				}
			}
			var after *time.Time
			if !ended {
				after = &d
			}
			advOrgs, advID, nexts = append(advOrgs, org), append(advID, id), append(nexts, after)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("plan: read: %w", err)
		}
		if len(advOrgs) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		b.Queue(planInsert, now, orgs, ids, dues, deadlines, p.retention.Microseconds()).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var status string
				if err := rows.Scan(&status); err != nil {
					return err
				}
				res.planned++
				if status == StatusMissed {
					res.plannedMissed++
				}
			}
			return rows.Err()
		})
		b.Queue(planAdvance, advOrgs, advID, nexts)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("plan: write: %w", err)
		}
		return nil
	})
	return res, err
}

// take is boundedPass's second half: occurrenceTake.
func take(ctx context.Context, db *pgxpool.Pool, p passParams) ([]taken, error) {
	rows, err := db.Query(ctx, occurrenceTake, pgx.NamedArgs{
		"now": p.now, "bound": p.bound, "token": p.token, "lease": p.lease.Microseconds(),
		"retention": p.retention.Microseconds(),
	})
	if err != nil {
		return nil, fmt.Errorf("take: %w", err)
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (taken, error) {
		var t taken
		err := r.Scan(&t.org, &t.savedSearchID, &t.dueAt, &t.id, &t.status, &t.attempts, &t.late, &t.hasSchedule,
			&t.paused, &t.actor)
		t.dueAt = t.dueAt.UTC()
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("take: %w", err)
	}
	return ts, nil
}

// recordParams are the inputs of recordOutcome.
type recordParams struct {
	org, savedSearchID uuid.UUID
	dueAt              time.Time
	token              uuid.UUID
	status, reason     string
	runID              *uuid.UUID
	runRetainUntil     *time.Time
	lastError          *string
	now                any
	retryAfter         time.Duration
	retention          time.Duration
}

// recordOutcome records an attempt's outcome and reports whether the fence
// held (false: another drain took the occurrence over).
func recordOutcome(ctx context.Context, db DBTX, p recordParams) (bool, error) {
	var reason any
	if p.reason != "" {
		reason = p.reason
	}
	tag, err := db.Exec(ctx, occurrenceRecord, pgx.NamedArgs{
		"org": p.org, "saved_search_id": p.savedSearchID, "due_at": p.dueAt, "token": p.token,
		"status": p.status, "reason": reason, "run_id": p.runID, "run_retain_until": p.runRetainUntil,
		"last_error": p.lastError, "now": p.now, "retry": p.retryAfter.Microseconds(),
		"retention": p.retention.Microseconds(),
	})
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}
