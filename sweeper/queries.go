package sweeper

// The SQL of the sweeper, in one place. A table is swept by a
// shardpass.Pass (internal/shardpass): the due query finds the rows past
// their retention, oldest first, at most the bound; then, per shard that
// holds some on a cluster (once, over the whole table, on PostgreSQL), a
// pass is two statements in one short transaction: a read that selects and
// locks at most @limit rows past their retention, oldest first, returning
// each row's id and ctid, and a delete of those it read that are still
// past it, found by their ctids. Both filter on the shard's distribution
// column values (@keys), unless @all: a cluster routes them to that one
// shard, so the locks and the ctids never span shards. Every statement
// takes the clock as agent.clock(@now) (migration 00019: Citus refuses
// coalesce(@now, now()) in a delete): production passes NULL, and inside
// one transaction now() is the transaction's start, so the read and the
// delete of a pass judge by the same instant; tests pass the same stubbed
// instant to both.
//
// The reads lock with FOR UPDATE SKIP LOCKED:
//   - the sweeper never waits: a row a claim, reclaim or completion holds
//     right now is skipped and left for the next pass;
//   - replicas sweeping at once take disjoint batches, so each row is read,
//     and deleted, by one of them;
//   - a writer that reaches a locked row waits for this one batch, never for
//     the run; the reads are bounded, so no pass locks more than one batch.
//
// The deletes find their rows by ctid, a Tid Scan that goes straight to the
// heap tuple, where a delete by id would probe the primary key once per row
// (measured: 1.7 ms against 5.9 ms for 1000 rows). A ctid names the row the
// read returned for as long as the pass's lock holds: a locked row cannot be
// updated or deleted by anyone else, and vacuum never removes or moves a live
// tuple, so the ctid cannot come to name another row before the delete. On a
// cluster a ctid names a row of one shard: the read and the delete of a
// pass run on the same shard, in the same transaction.
//
// The deletes re-check the retention anyway. Under the lock nothing can
// change a read row, so today the re-check never fires; it is what keeps a
// renewed row alive if the read ever stops locking, and it costs nothing.

// claimExpiredDue finds expired claims, oldest first, on the retain_until
// index.
const claimExpiredDue = `
SELECT k.organization_id::text
FROM agent.idempotency_keys k
WHERE k.retain_until <= agent.clock(@now)
ORDER BY k.retain_until
LIMIT @limit`

// claimExpiredRead selects expired claims of a shard, oldest first.
const claimExpiredRead = `
SELECT k.id, k.ctid
FROM agent.idempotency_keys k
WHERE (@all::boolean OR k.organization_id = ANY(@keys::uuid[]))
	AND k.retain_until <= agent.clock(@now)
ORDER BY k.retain_until
LIMIT @limit
FOR UPDATE SKIP LOCKED`

// claimExpiredDelete deletes the claims at the ctids still past their
// retention. idempotency.ReplaceExpired rewrites an expired row in place
// (new id, new retain_until), so a row a claimer has just taken over no
// longer matches either condition.
const claimExpiredDelete = `
DELETE FROM agent.idempotency_keys k
WHERE (@all::boolean OR k.organization_id = ANY(@keys::uuid[]))
	AND k.ctid = ANY(@ctids::tid[])
	AND k.retain_until <= agent.clock(@now)`

// occurrenceExpiredDue finds closed occurrences of schedules past their
// retention (an open one has none), oldest first, on
// schedule_occurrences_retain_idx.
const occurrenceExpiredDue = `
SELECT o.organization_id::text
FROM agent.schedule_occurrences o
WHERE o.retain_until <= agent.clock(@now)
ORDER BY o.retain_until
LIMIT @limit`

// occurrenceExpiredRead selects occurrences of a shard past their
// retention, oldest first.
const occurrenceExpiredRead = `
SELECT o.id, o.ctid
FROM agent.schedule_occurrences o
WHERE (@all::boolean OR o.organization_id = ANY(@keys::uuid[]))
	AND o.retain_until <= agent.clock(@now)
ORDER BY o.retain_until
LIMIT @limit
FOR UPDATE SKIP LOCKED`

// occurrenceExpiredDelete deletes the occurrences at the ctids still past
// their retention.
const occurrenceExpiredDelete = `
DELETE FROM agent.schedule_occurrences o
WHERE (@all::boolean OR o.organization_id = ANY(@keys::uuid[]))
	AND o.ctid = ANY(@ctids::tid[])
	AND o.retain_until <= agent.clock(@now)`

// runExpiredDue finds Runs past their retention, oldest first, on
// runs_retain_until_idx.
const runExpiredDue = `
SELECT r.organization_id::text
FROM agent.runs r
WHERE r.retain_until <= agent.clock(@now)
ORDER BY r.retain_until
LIMIT @limit`

// runExpiredRead selects Runs of a shard past their retention, oldest
// first.
const runExpiredRead = `
SELECT r.id, r.ctid
FROM agent.runs r
WHERE (@all::boolean OR r.organization_id = ANY(@keys::uuid[]))
	AND r.retain_until <= agent.clock(@now)
ORDER BY r.retain_until
LIMIT @limit
FOR UPDATE SKIP LOCKED`

// runExpiredDelete deletes the Runs at the ctids still past their
// retention. Their provider jobs go with them (ON DELETE CASCADE, within
// the shard group on a cluster).
const runExpiredDelete = `
DELETE FROM agent.runs r
WHERE (@all::boolean OR r.organization_id = ANY(@keys::uuid[]))
	AND r.ctid = ANY(@ctids::tid[])
	AND r.retain_until <= agent.clock(@now)`

// directoryExpiredDue finds provider job directory entries past their
// retention (their job's Run retention), oldest first, on
// provider_job_directory_retain_until_idx. On a cluster the directory is a
// reference table, a copy on every node: one pass, @all.
const directoryExpiredDue = `
SELECT d.provider_job_id
FROM agent.provider_job_directory d
WHERE d.retain_until <= agent.clock(@now)
ORDER BY d.retain_until
LIMIT @limit`

// directoryExpiredRead selects directory entries of a shard past their
// retention, oldest first, with the id of the job each names.
const directoryExpiredRead = `
SELECT d.job_id, d.ctid
FROM agent.provider_job_directory d
WHERE (@all::boolean OR d.provider_job_id = ANY(@keys::text[]))
	AND d.retain_until <= agent.clock(@now)
ORDER BY d.retain_until
LIMIT @limit
FOR UPDATE SKIP LOCKED`

// directoryExpiredDelete deletes the directory entries of the jobs read
// (@ids) still past their retention: a registration that took one over
// since moved its retain_until on. By job, not by ctid: each copy of a
// reference table is a table of its own, where the same row has its own
// ctid.
const directoryExpiredDelete = `
DELETE FROM agent.provider_job_directory d
WHERE (@all::boolean OR d.provider_job_id = ANY(@keys::text[]))
	AND d.job_id = ANY(@ids::uuid[])
	AND d.retain_until <= agent.clock(@now)`

// snapshotDeletable is the condition that lets a snapshot go, on alias s:
//   - it is older than the minimum age (@min_age_us), so a snapshot a start
//     is freezing or admitting right now is never a candidate;
//   - no Run refers to it (runs_snapshot_idx);
//   - no retained claim in the saved-search start scope (@scope) names it
//     as its resource: a start whose preparation completed but whose Run is
//     not yet admitted finds its snapshot through that claim (the
//     organization and scope prefix of the claim's unique index narrows the
//     probe).
//
// Both probes join on the organization, and name the group's
// organizations as the snapshot does: on a cluster Citus then routes the
// whole statement to the snapshot's own shard group (it refuses FOR
// UPDATE on anything else).
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
			AND k.scope = @scope::text
			AND k.resource_id = s.id::text
			AND k.retain_until > agent.clock(@now))`

// snapshotOrphanDue finds deletable snapshots, oldest first, without a
// lock.
const snapshotOrphanDue = `
SELECT s.organization_id::text
FROM agent.saved_search_snapshots s
WHERE` + snapshotDeletable + `
ORDER BY s.created_at
LIMIT @limit`

// snapshotOrphanRead selects deletable snapshots of a shard, oldest first,
// and locks them. The lock conflicts with the FOR KEY SHARE lock the
// runs_snapshot_fkey check takes, so a Run being admitted on a snapshot
// right now makes the read skip it, and a Run admitted after the read waits
// for this batch and then fails its foreign key check: it loses cleanly,
// and the snapshot it would have named was past every retention.
const snapshotOrphanRead = `
SELECT s.id, s.ctid
FROM agent.saved_search_snapshots s
WHERE (@all::boolean OR s.organization_id = ANY(@keys::uuid[])) AND` + snapshotDeletable + `
ORDER BY s.created_at
LIMIT @limit
FOR UPDATE OF s SKIP LOCKED`

// snapshotOrphanDelete deletes the snapshots at the ctids still deletable.
// Unlike the other deletes, its re-check can fire: it runs on a newer MVCC
// snapshot than the read, so it sees a Run or a claim committed between the
// two, and that keeps the snapshot (and the foreign key from ever failing
// here).
const snapshotOrphanDelete = `
DELETE FROM agent.saved_search_snapshots s
WHERE (@all::boolean OR s.organization_id = ANY(@keys::uuid[]))
	AND s.ctid = ANY(@ctids::tid[])
	AND` + snapshotDeletable

// dropExpiredDue finds dropped deliveries received longer ago than their
// retention (@retention_us), oldest first, on webhook_drops_received_at_idx.
// Drops stay a local table on a cluster's coordinator (an unknown_job drop
// names no organization): one pass, @all.
const dropExpiredDue = `
SELECT d.id::text
FROM agent.webhook_drops d
WHERE d.received_at <= agent.clock(@now) - @retention_us::bigint * interval '1 microsecond'
ORDER BY d.received_at
LIMIT @limit`

// dropExpiredRead selects expired drops, oldest first. Drops are written
// once and never updated, so nothing but another sweeper ever holds one.
const dropExpiredRead = `
SELECT d.id, d.ctid
FROM agent.webhook_drops d
WHERE (@all::boolean OR d.id::text = ANY(@keys::text[]))
	AND d.received_at <= agent.clock(@now) - @retention_us::bigint * interval '1 microsecond'
ORDER BY d.received_at
LIMIT @limit
FOR UPDATE SKIP LOCKED`

// dropExpiredDelete deletes the drops at the ctids still past their
// retention.
const dropExpiredDelete = `
DELETE FROM agent.webhook_drops d
WHERE (@all::boolean OR d.id::text = ANY(@keys::text[]))
	AND d.ctid = ANY(@ctids::tid[])
	AND d.received_at <= agent.clock(@now) - @retention_us::bigint * interval '1 microsecond'`

// resolutionExpiredDue finds resolutions of uncertain tool calls past their
// retention, oldest first, on tool_call_resolutions_retain_until_idx.
const resolutionExpiredDue = `
SELECT r.organization_id::text
FROM agent.tool_call_resolutions r
WHERE r.retain_until <= agent.clock(@now)
ORDER BY r.retain_until
LIMIT @limit`

// resolutionExpiredRead selects resolutions of a shard past their
// retention, oldest first. Resolutions are written once and never updated.
const resolutionExpiredRead = `
SELECT r.id, r.ctid
FROM agent.tool_call_resolutions r
WHERE (@all::boolean OR r.organization_id = ANY(@keys::uuid[]))
	AND r.retain_until <= agent.clock(@now)
ORDER BY r.retain_until
LIMIT @limit
FOR UPDATE SKIP LOCKED`

// resolutionExpiredDelete deletes the resolutions at the ctids still past
// their retention.
const resolutionExpiredDelete = `
DELETE FROM agent.tool_call_resolutions r
WHERE (@all::boolean OR r.organization_id = ANY(@keys::uuid[]))
	AND r.ctid = ANY(@ctids::tid[])
	AND r.retain_until <= agent.clock(@now)`

// inboxExpiredDue finds finished arrivals of the provider inbox received
// longer ago than their retention (@retention_us: the drop audit's),
// oldest first, on provider_inbox_received_at_idx. A pending arrival is
// never swept: it is a delivery that was acknowledged and not yet applied,
// and deleting it would lose it; the inbox's lag gauge shows one that
// stays.
const inboxExpiredDue = `
SELECT i.organization_id::text
FROM agent.provider_inbox i
WHERE i.received_at <= agent.clock(@now) - @retention_us::bigint * interval '1 microsecond'
	AND i.status <> 'pending'
ORDER BY i.received_at
LIMIT @limit`

// inboxExpiredRead selects finished arrivals of a shard past their
// retention, oldest first. SKIP LOCKED passes over an arrival being applied
// or counted right now. Its copies go with it (ON DELETE CASCADE).
const inboxExpiredRead = `
SELECT i.id, i.ctid
FROM agent.provider_inbox i
WHERE (@all::boolean OR i.organization_id = ANY(@keys::uuid[]))
	AND i.received_at <= agent.clock(@now) - @retention_us::bigint * interval '1 microsecond'
	AND i.status <> 'pending'
ORDER BY i.received_at
LIMIT @limit
FOR UPDATE SKIP LOCKED`

// inboxExpiredDelete deletes the arrivals at the ctids still past their
// retention and finished.
const inboxExpiredDelete = `
DELETE FROM agent.provider_inbox i
WHERE (@all::boolean OR i.organization_id = ANY(@keys::uuid[]))
	AND i.ctid = ANY(@ctids::tid[])
	AND i.received_at <= agent.clock(@now) - @retention_us::bigint * interval '1 microsecond'
	AND i.status <> 'pending'`

// sessionExpiredDue finds console sessions past their expiry, oldest
// first, on console_sessions_expires_idx: an expired session is refused by
// every read already (sessions.Store.Lookup), so it goes at once. Sessions
// stay a local table on a cluster's coordinator: one pass, @all.
const sessionExpiredDue = `
SELECT s.id::text
FROM agent.console_sessions s
WHERE s.expires_at <= agent.clock(@now)
ORDER BY s.expires_at
LIMIT @limit`

// sessionExpiredRead selects console sessions past their expiry, oldest
// first.
const sessionExpiredRead = `
SELECT s.id, s.ctid
FROM agent.console_sessions s
WHERE (@all::boolean OR s.id::text = ANY(@keys::text[]))
	AND s.expires_at <= agent.clock(@now)
ORDER BY s.expires_at
LIMIT @limit
FOR UPDATE SKIP LOCKED`

// sessionExpiredDelete deletes the sessions at the ctids still past their
// expiry.
const sessionExpiredDelete = `
DELETE FROM agent.console_sessions s
WHERE (@all::boolean OR s.id::text = ANY(@keys::text[]))
	AND s.ctid = ANY(@ctids::tid[])
	AND s.expires_at <= agent.clock(@now)`
