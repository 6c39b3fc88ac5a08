package snapshot

// Time comes from the database.

// savedSearchFreezeRead reads the live saved search, its baseline and the
// clock in one statement (one MVCC snapshot); now() is the transaction's
// start, so created_at is known before the insert. $1 org, $2 id.
const savedSearchFreezeRead = `
SELECT s.name, s.brief, s.version, b.items, b.cursor, now()
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL`

// snapshotInsert writes a snapshot; claim_id is NULL for none. Named parameters.
const snapshotInsert = `
INSERT INTO agent.saved_search_snapshots
	(id, organization_id, saved_search_id, saved_search_version, saved_search_name,
	 brief, baseline, content_hash, created_by, origin, created_at, claim_id)
VALUES (@id::uuid, @org::uuid, @saved_search_id::uuid, @version::bigint, @name::text,
	@brief::jsonb, @baseline::jsonb, @content_hash::text, @created_by::text, @origin::text, @created_at::timestamptz,
	@claim_id::uuid)`

const snapshotColumns = `sn.id, sn.organization_id, sn.saved_search_id, sn.saved_search_version,
	sn.saved_search_name, sn.brief, sn.baseline, sn.content_hash, sn.created_by, sn.origin, sn.created_at`

// snapshotGet reads one snapshot. $1 org, $2 id.
const snapshotGet = `
SELECT ` + snapshotColumns + `
FROM agent.saved_search_snapshots sn
WHERE sn.organization_id = $1 AND sn.id = $2`

// snapshotListBySavedSearch reads snapshot summaries newest first after
// ($3 created_at, $4 id; NULLs for the start). $1 org, $2 saved_search_id, $5 limit.
const snapshotListBySavedSearch = `
SELECT sn.id, sn.saved_search_id, sn.saved_search_version, sn.content_hash, sn.created_by, sn.origin,
	sn.created_at, sn.brief_bytes, sn.baseline_bytes, sn.baseline_items
FROM agent.saved_search_snapshots sn
WHERE sn.organization_id = $1 AND sn.saved_search_id = $2
	AND (sn.created_at, sn.id) < (coalesce($3::timestamptz, 'infinity'),
		coalesce($4::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY sn.created_at DESC, sn.id DESC
LIMIT $5`

// savedSearchKnown reports whether org has the saved search, archived or not.
const savedSearchKnown = `
SELECT EXISTS (
	SELECT 1 FROM agent.saved_searches s WHERE s.organization_id = $1 AND s.id = $2)`

// snapshotAuditHeader reads a snapshot without its items; the brief whole if
// at most $3 bytes, else its query. $1 org, $2 id.
const snapshotAuditHeader = `
SELECT sn.id, sn.organization_id, sn.saved_search_id, sn.saved_search_version, sn.saved_search_name,
	CASE WHEN sn.brief_bytes <= $3 THEN sn.brief
		ELSE jsonb_build_object('query', coalesce(left(sn.brief ->> 'query', 2000), '')) END,
	sn.brief_bytes, sn.baseline_items, left(sn.baseline ->> 'cursor', 4096),
	sn.content_hash, sn.created_by, sn.origin, sn.created_at
FROM agent.saved_search_snapshots sn
WHERE sn.organization_id = $1 AND sn.id = $2`

// auditItem cuts a baseline item to MaxItemLen (200), ending in "…".
const auditItem = `CASE WHEN char_length(x.item) > 200 THEN left(x.item, 200) || '…' ELSE x.item END`

// snapshotAuditItems reads baseline items after position $3, at most $4.
// $1 org, $2 id.
const snapshotAuditItems = `
SELECT ` + auditItem + `
FROM agent.saved_search_snapshots sn, jsonb_array_elements_text(sn.baseline -> 'items') WITH ORDINALITY x(item, pos)
WHERE sn.organization_id = $1 AND sn.id = $2 AND x.pos > $3
ORDER BY x.pos
LIMIT $4`

// snapshotAuditSides are the items and positions of the older ($2) and
// newer ($3) snapshot of org $1.
const snapshotAuditSides = `
WITH o AS (
	SELECT x.item, x.pos
	FROM agent.saved_search_snapshots sn, jsonb_array_elements_text(sn.baseline -> 'items') WITH ORDINALITY x(item, pos)
	WHERE sn.organization_id = $1 AND sn.id = $2
), n AS (
	SELECT x.item, x.pos
	FROM agent.saved_search_snapshots sn, jsonb_array_elements_text(sn.baseline -> 'items') WITH ORDINALITY x(item, pos)
	WHERE sn.organization_id = $1 AND sn.id = $3
)`

// snapshotAuditDiffCounts counts the items added, kept and removed.
const snapshotAuditDiffCounts = snapshotAuditSides + `
SELECT
	(SELECT count(*) FROM n WHERE NOT EXISTS (SELECT FROM o WHERE o.item = n.item)),
	(SELECT count(*) FROM n WHERE EXISTS (SELECT FROM o WHERE o.item = n.item)),
	(SELECT count(*) FROM o WHERE NOT EXISTS (SELECT FROM n WHERE n.item = o.item))`

// snapshotAuditDiffPage reads added items after $4 and removed ones after
// $5, at most $6 each: (true, position, item) for added, false for removed.
const snapshotAuditDiffPage = snapshotAuditSides + `
(SELECT true, x.pos, ` + auditItem + ` FROM n x
	WHERE x.pos > $4 AND NOT EXISTS (SELECT FROM o WHERE o.item = x.item) ORDER BY x.pos LIMIT $6)
UNION ALL
(SELECT false, x.pos, ` + auditItem + ` FROM o x
	WHERE x.pos > $5 AND NOT EXISTS (SELECT FROM n WHERE n.item = x.item) ORDER BY x.pos LIMIT $6)`
