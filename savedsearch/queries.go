package savedsearch

// Time comes from the database. Every statement names the organization, the
// Citus distribution column.

// savedSearchColumns are read with the saved search as s and its baseline as b.
const savedSearchColumns = `s.id, s.organization_id, s.name, s.brief, s.version,
	s.created_at, s.updated_at, b.items, b.cursor`

// savedSearchInsert and baselineInsert: two statements rather than a
// data-modifying WITH, for Citus routing. Named parameters.
const savedSearchInsert = `
INSERT INTO agent.saved_searches AS s
	(id, organization_id, name, brief, created_by, created_at, updated_at)
VALUES (@id::uuid, @org::uuid, @name::text, @brief::jsonb, @created_by::text, now(), now())
RETURNING s.id, s.organization_id, s.name, s.brief, s.version, s.created_at, s.updated_at`

const baselineInsert = `
INSERT INTO agent.saved_search_baselines AS b (saved_search_id, organization_id, items, cursor, updated_at)
VALUES (@id::uuid, @org::uuid, @items::text[], @cursor::text, now())
RETURNING b.items, b.cursor`

// savedSearchGet reads a live saved search with its baseline. $1 org, $2 id.
const savedSearchGet = `
SELECT ` + savedSearchColumns + `
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL`

// savedSearchList reads live summaries newest first after ($2 created_at,
// $3 id; NULLs for the start), never filters or items. $1 org, $4 limit.
const savedSearchList = `
SELECT s.id, s.organization_id, s.name, left(s.brief ->> 'query', ` + maxQueryLenSQL + `), s.version,
	s.created_at, s.updated_at, s.brief_bytes, b.item_count, NULL::timestamptz
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.archived_at IS NULL
	AND (s.created_at, s.id) < (coalesce($2::timestamptz, 'infinity'),
		coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY s.created_at DESC, s.id DESC
LIMIT $4`

// savedSearchChanged reports whether savedSearchUpdate changes anything;
// briefs compare as jsonb text (key order and spaces ignored).
const savedSearchChanged = `(coalesce($3::text, s.name) IS DISTINCT FROM s.name
	OR coalesce($4::jsonb, s.brief)::text IS DISTINCT FROM s.brief::text)`

// savedSearchUpdate sets the name and brief (NULL keeps each), bumping the
// version only on a change; with both NULL it only locks the row for a
// baseline replace. The clock is a function in FROM because Citus refuses
// now() in a modifying CASE. $1 org, $2 id, $3 name, $4 brief.
const savedSearchUpdate = `
UPDATE agent.saved_searches AS s
SET name = coalesce($3::text, s.name),
	brief = coalesce($4::jsonb, s.brief),
	version = s.version + CASE WHEN ` + savedSearchChanged + ` THEN 1 ELSE 0 END,
	updated_at = CASE WHEN ` + savedSearchChanged + ` THEN c.now ELSE s.updated_at END
FROM agent.clock(NULL) AS c(now)
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL
RETURNING s.id, s.organization_id, s.name, s.brief, s.version, s.created_at, s.updated_at`

// baselineGet reads a baseline, the row locked. $1 org, $2 saved_search_id.
const baselineGet = `
SELECT b.items, b.cursor FROM agent.saved_search_baselines b
WHERE b.organization_id = $1 AND b.saved_search_id = $2`

// baselineReplace sets a differing baseline and bumps the version; else no
// row. The row locked. $1 org, $2 saved_search_id, $3 items, $4 cursor.
const baselineReplace = `
WITH b AS (
	UPDATE agent.saved_search_baselines AS b
	SET items = $3::text[], cursor = $4::text, updated_at = now()
	WHERE b.organization_id = $1 AND b.saved_search_id = $2
		AND (b.items IS DISTINCT FROM $3::text[] OR b.cursor IS DISTINCT FROM $4::text)
	RETURNING b.organization_id, b.saved_search_id, b.items, b.cursor
), s AS (
	UPDATE agent.saved_searches AS s
	SET version = s.version + 1, updated_at = now()
	FROM b
	WHERE s.organization_id = $1 AND s.organization_id = b.organization_id AND s.id = b.saved_search_id
	RETURNING s.version, s.updated_at
)
SELECT b.items, b.cursor, s.version, s.updated_at FROM b, s`

// savedSearchArchive archives a live saved search and bumps its version. $1 org, $2 id.
const savedSearchArchive = `
UPDATE agent.saved_searches AS s
SET archived_at = now(), version = s.version + 1, updated_at = now()
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL`

// savedSearchExists reports whether a live saved search exists. $1 org, $2 id.
const savedSearchExists = `
SELECT EXISTS (
	SELECT 1 FROM agent.saved_searches s
	WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL)`

// savedSearchGetAny reads a saved search, live or archived. $1 org, $2 id.
const savedSearchGetAny = `
SELECT ` + savedSearchColumns + `, s.archived_at
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2`

// savedSearchListArchived is savedSearchList for archived ones. $1 org, $2 created_at, $3 id, $4 limit.
const savedSearchListArchived = `
SELECT s.id, s.organization_id, s.name, left(s.brief ->> 'query', ` + maxQueryLenSQL + `), s.version,
	s.created_at, s.updated_at, s.brief_bytes, b.item_count, s.archived_at
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.archived_at IS NOT NULL
	AND (s.created_at, s.id) < (coalesce($2::timestamptz, 'infinity'),
		coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY s.created_at DESC, s.id DESC
LIMIT $4`

// savedSearchLockGet is savedSearchGet FOR UPDATE. $1 org, $2 id.
const savedSearchLockGet = savedSearchGet + `
FOR UPDATE OF s`

// savedSearchLockVersion locks a live saved search and reads its version. $1 org, $2 id.
const savedSearchLockVersion = `
SELECT s.version FROM agent.saved_searches s
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL
FOR UPDATE`
