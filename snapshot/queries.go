package snapshot

// The SQL of snapshots, in one place. Time comes from the database.

// savedSearchFreezeRead reads what a freeze copies: the live saved search's
// name, brief and version and its baseline, joined in ONE statement so they
// come from one MVCC snapshot and cannot mix two versions, and the database
// clock, which stamps the snapshot. In a transaction now() is its start and
// does not move, so the snapshot's created_at is known before its insert is
// sent, and the claim that stores the snapshot can be queued beside it.
// $1 org, $2 id.
const savedSearchFreezeRead = `
SELECT s.name, s.brief, s.version, b.items, b.cursor, now()
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL`

// snapshotInsert writes a snapshot. Its parameters are named
// (pgx.StrictNamedArgs); created_at is the clock savedSearchFreezeRead read.
const snapshotInsert = `
INSERT INTO agent.saved_search_snapshots
	(id, organization_id, saved_search_id, saved_search_version, saved_search_name,
	 brief, baseline, content_hash, created_by, origin, created_at)
VALUES (@id::uuid, @org::uuid, @saved_search_id::uuid, @version::bigint, @name::text,
	@brief::jsonb, @baseline::jsonb, @content_hash::text, @created_by::text, @origin::text, @created_at::timestamptz)`

const snapshotColumns = `sn.id, sn.organization_id, sn.saved_search_id, sn.saved_search_version,
	sn.saved_search_name, sn.brief, sn.baseline, sn.content_hash, sn.created_by, sn.origin, sn.created_at`

// snapshotGet reads one snapshot. $1 org, $2 id.
const snapshotGet = `
SELECT ` + snapshotColumns + `
FROM agent.saved_search_snapshots sn
WHERE sn.organization_id = $1 AND sn.id = $2`

// snapshotListBySavedSearch reads a page of a saved search's snapshot
// summaries, newest first, after the position ($3 created_at, $4 id; NULLs
// mean before every row), by the (organization_id, saved_search_id,
// created_at DESC, id DESC) index. It reads the stored sizes, never the
// brief or the baseline. $1 org, $2 saved_search_id, $5 limit.
const snapshotListBySavedSearch = `
SELECT sn.id, sn.saved_search_id, sn.saved_search_version, sn.content_hash, sn.created_by, sn.origin,
	sn.created_at, sn.brief_bytes, sn.baseline_bytes, sn.baseline_items
FROM agent.saved_search_snapshots sn
WHERE sn.organization_id = $1 AND sn.saved_search_id = $2
	AND (sn.created_at, sn.id) < (coalesce($3::timestamptz, 'infinity'),
		coalesce($4::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY sn.created_at DESC, sn.id DESC
LIMIT $5`

// savedSearchKnown reports whether org has the saved search, archived or
// not: the audit trail outlives the archive. $1 org, $2 id.
const savedSearchKnown = `
SELECT EXISTS (
	SELECT 1 FROM agent.saved_searches s WHERE s.organization_id = $1 AND s.id = $2)`
