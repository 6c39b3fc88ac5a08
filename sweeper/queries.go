package sweeper

// Each table's pass runs three statements: the due query, then per shard
// group (@keys, or @all on PostgreSQL) a read that locks at most @limit
// rows past retention and a delete of those still past it, by ctid. A
// ctid is stable while the read's lock holds, and a Tid Scan beats a
// primary-key probe per row (1.7 ms against 5.9 ms for 1000 rows). The
// clock is agent.clock(@now): in one transaction now() is fixed, so the
// read and the delete judge by the same instant.

type statements struct{ due, read, delete string }

// expired returns the statements of a table whose rows on alias are past
// retention when past holds, oldest first by order, sharded by column key
// of SQL type keyType.
func expired(table, alias, key, keyType, order, past string) statements {
	due := key
	if keyType != "text" {
		due += "::text"
	}
	shard := "(@all::boolean OR " + key + " = ANY(@keys::" + keyType + "[]))"
	return statements{
		due: `
SELECT ` + due + `
FROM ` + table + ` ` + alias + `
WHERE ` + past + `
ORDER BY ` + order + `
LIMIT @limit`,
		read: `
SELECT ` + alias + `.id, ` + alias + `.ctid
FROM ` + table + ` ` + alias + `
WHERE ` + shard + `
	AND ` + past + `
ORDER BY ` + order + `
LIMIT @limit
FOR UPDATE SKIP LOCKED`,
		delete: `
DELETE FROM ` + table + ` ` + alias + `
WHERE ` + shard + `
	AND ` + alias + `.ctid = ANY(@ctids::tid[])
	AND ` + past,
	}
}

// claimExpired sweeps expired claims. The delete's re-check matters:
// idempotency.ReplaceExpired rewrites an expired row in place.
var claimExpired = expired(TableClaims, "k", "k.organization_id", "uuid",
	"k.retain_until", "k.retain_until <= agent.clock(@now)")

// occurrenceExpired sweeps closed schedule occurrences (an open one has no
// retain_until).
var occurrenceExpired = expired(TableOccurrences, "o", "o.organization_id", "uuid",
	"o.retain_until", "o.retain_until <= agent.clock(@now)")

var runExpired = expired(TableRuns, "r", "r.organization_id", "uuid",
	"r.retain_until", "r.retain_until <= agent.clock(@now)")

// directoryExpired sweeps provider job directory entries. The directory
// is a reference table on a cluster, whose copies each have their own
// ctids, so it deletes by job id (@ids), not by ctid.
var directoryExpired = statements{
	due: `
SELECT d.provider_job_id
FROM agent.provider_job_directory d
WHERE d.retain_until <= agent.clock(@now)
ORDER BY d.retain_until
LIMIT @limit`,
	read: `
SELECT d.job_id, d.ctid
FROM agent.provider_job_directory d
WHERE (@all::boolean OR d.provider_job_id = ANY(@keys::text[]))
	AND d.retain_until <= agent.clock(@now)
ORDER BY d.retain_until
LIMIT @limit
FOR UPDATE SKIP LOCKED`,
	delete: `
DELETE FROM agent.provider_job_directory d
WHERE (@all::boolean OR d.provider_job_id = ANY(@keys::text[]))
	AND d.job_id = ANY(@ids::uuid[])
	AND d.retain_until <= agent.clock(@now)`,
}

// snapshotDeletable lets a snapshot (alias s) go when it is older than
// @min_age_us, no Run refers to it, and no retained start claim names it:
// the claim is what finds the snapshot of a start whose Run is not yet
// admitted. A snapshot with no claim_id (written by an older release) is
// checked against every retained start claim of its organization. Every
// probe filters on the organization so Citus routes the statement to one
// shard group.
const snapshotDeletable = `
	s.created_at <= agent.clock(@now) - @min_age_us::bigint * interval '1 microsecond'
	AND NOT EXISTS (
		SELECT 1 FROM agent.runs r
		WHERE (@all::boolean OR r.organization_id = ANY(@keys::uuid[]))
			AND r.organization_id = s.organization_id AND r.snapshot_id = s.id)
	AND NOT EXISTS (
		SELECT 1 FROM agent.idempotency_keys k
		WHERE (@all::boolean OR k.organization_id = ANY(@keys::uuid[]))
			AND k.organization_id = s.organization_id
			AND k.id = s.claim_id
			AND k.scope = @scope::text
			AND k.resource_id = s.id::text
			AND k.retain_until > agent.clock(@now))
	AND (s.claim_id IS NOT NULL OR NOT EXISTS (
		SELECT 1 FROM agent.idempotency_keys k
		WHERE (@all::boolean OR k.organization_id = ANY(@keys::uuid[]))
			AND k.organization_id = s.organization_id
			AND k.scope = @scope::text
			AND k.resource_id = s.id::text
			AND k.retain_until > agent.clock(@now)))`

// snapshotWindow limits the snapshot pass to the oldest 4×@bound
// snapshots past the minimum age; without it a pass that finds less than a
// bound walks nearly the whole table. Orphans sit there: Runs go in the
// order of their snapshots.
const snapshotWindow = `
FROM (SELECT w.organization_id, w.id
	FROM agent.saved_search_snapshots w
	WHERE (@all::boolean OR w.organization_id = ANY(@keys::uuid[]))
		AND w.created_at <= agent.clock(@now) - @min_age_us::bigint * interval '1 microsecond'
	ORDER BY w.created_at
	LIMIT 4 * @bound::bigint) w
JOIN agent.saved_search_snapshots s ON s.id = w.id AND s.organization_id = w.organization_id`

// snapshotOrphan sweeps deletable snapshots in the window. The read's lock
// conflicts with runs_snapshot_fkey's FOR KEY SHARE: a Run being admitted
// on a snapshot makes the read skip it, and one admitted after waits and
// fails its foreign key. The delete's re-check sees Runs and claims
// committed since the read, and keeps their snapshots.
var snapshotOrphan = statements{
	due: `
SELECT s.organization_id::text` + snapshotWindow + `
WHERE` + snapshotDeletable + `
ORDER BY s.created_at
LIMIT @limit`,
	read: `
SELECT s.id, s.ctid` + snapshotWindow + `
WHERE (@all::boolean OR s.organization_id = ANY(@keys::uuid[])) AND` + snapshotDeletable + `
ORDER BY s.created_at
LIMIT @limit
FOR UPDATE OF s SKIP LOCKED`,
	delete: `
DELETE FROM agent.saved_search_snapshots s
WHERE (@all::boolean OR s.organization_id = ANY(@keys::uuid[]))
	AND s.ctid = ANY(@ctids::tid[])
	AND` + snapshotDeletable,
}

// retentionPast holds for a row (alias a) received longer ago than
// @retention_us.
func retentionPast(a string) string {
	return a + ".received_at <= agent.clock(@now) - @retention_us::bigint * interval '1 microsecond'"
}

// dropExpired sweeps old webhook drops, a local table on a cluster's
// coordinator (an unknown_job drop names no organization).
var dropExpired = expired(TableDrops, "d", "d.id::text", "text",
	"d.received_at", retentionPast("d"))

var resolutionExpired = expired(TableResolutions, "r", "r.organization_id", "uuid",
	"r.retain_until", "r.retain_until <= agent.clock(@now)")

// inboxExpired sweeps finished inbox arrivals, kept as long as the drops.
// A pending arrival was acknowledged and not yet applied: deleting it
// would lose it.
var inboxExpired = expired(TableInbox, "i", "i.organization_id", "uuid",
	"i.received_at", retentionPast("i")+"\n\tAND i.status <> 'pending'")

// sessionExpired sweeps expired console sessions, a table not distributed
// on a cluster.
var sessionExpired = expired(TableSessions, "s", "s.id", "uuid",
	"s.expires_at", "s.expires_at <= agent.clock(@now)")
