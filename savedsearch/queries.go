package savedsearch

// The SQL of saved searches, in one place. Time comes from the database.

// savedSearchColumns are read with the saved search as s and its baseline as b.
const savedSearchColumns = `s.id, s.organization_id, s.name, s.brief, s.version,
	s.created_at, s.updated_at, b.items, b.cursor`

// savedSearchInsert creates a saved search and its baseline in one
// statement, so neither exists without the other.
// $1 id, $2 org, $3 name, $4 brief, $5 created_by, $6 items, $7 cursor.
const savedSearchInsert = `
WITH s AS (
	INSERT INTO agent.saved_searches
		(id, organization_id, name, brief, created_by, created_at, updated_at)
	VALUES ($1::uuid, $2::uuid, $3::text, $4::jsonb, $5::text, now(), now())
	RETURNING *
), b AS (
	INSERT INTO agent.saved_search_baselines (saved_search_id, items, cursor, updated_at)
	SELECT s.id, $6::text[], $7::text, s.created_at FROM s
	RETURNING *
)
SELECT ` + savedSearchColumns + `
FROM s JOIN b ON b.saved_search_id = s.id`

// savedSearchGet reads a live saved search with its baseline, in one
// statement and so from one snapshot of both tables. $1 org, $2 id.
const savedSearchGet = `
SELECT ` + savedSearchColumns + `
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL`

// savedSearchList reads a page of live saved searches, newest first, after
// the position ($2 created_at, $3 id); NULLs mean before every row.
// $1 org, $4 limit.
const savedSearchList = `
SELECT ` + savedSearchColumns + `
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.archived_at IS NULL
	AND (s.created_at, s.id) < (coalesce($2::timestamptz, 'infinity'),
		coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY s.created_at DESC, s.id DESC
LIMIT $4`

// savedSearchUpdate changes the name and brief (NULL keeps the stored value)
// and bumps the version. It is also the first statement of a baseline
// replace, with both NULL: its row lock orders every writer of the saved
// search, which is what keeps a reader's brief and baseline from mixing.
// $1 org, $2 id, $3 name, $4 brief.
const savedSearchUpdate = `
UPDATE agent.saved_searches AS s
SET name = coalesce($3::text, s.name),
	brief = coalesce($4::jsonb, s.brief),
	version = s.version + 1,
	updated_at = now()
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL
RETURNING s.id, s.organization_id, s.name, s.brief, s.version, s.created_at, s.updated_at`

// baselineGet reads a baseline. Run after savedSearchUpdate in the same
// transaction, it sees the baseline no other writer can change until commit.
// $1 saved_search_id.
const baselineGet = `
SELECT b.items, b.cursor FROM agent.saved_search_baselines b WHERE b.saved_search_id = $1`

// baselineReplace sets the whole baseline. $1 saved_search_id, $2 items,
// $3 cursor.
const baselineReplace = `
UPDATE agent.saved_search_baselines AS b
SET items = $2::text[], cursor = $3::text, updated_at = now()
WHERE b.saved_search_id = $1
RETURNING b.items, b.cursor`

// savedSearchArchive archives a live saved search; archiving is a change, so
// it bumps the version too. $1 org, $2 id.
const savedSearchArchive = `
UPDATE agent.saved_searches AS s
SET archived_at = now(), version = s.version + 1, updated_at = now()
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL`

// savedSearchExists reports whether a live saved search exists. $1 org, $2 id.
const savedSearchExists = `
SELECT EXISTS (
	SELECT 1 FROM agent.saved_searches s
	WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL)`
