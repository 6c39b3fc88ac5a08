package savedsearch

// The SQL of saved searches, in one place. Time comes from the database.
//
// Every statement names the organization, the distribution column on a
// cluster sharded by organization (docs/scaling.md), and a baseline is
// joined to its saved search on (organization_id, id): each statement is
// routed to the one shard group that holds the organization's rows.

// savedSearchColumns are read with the saved search as s and its baseline as b.
const savedSearchColumns = `s.id, s.organization_id, s.name, s.brief, s.version,
	s.created_at, s.updated_at, b.items, b.cursor`

// savedSearchInsert creates a saved search, and baselineInsert its
// baseline: two statements of one transaction, so neither exists without
// the other (a baseline's foreign key names its saved search, inserted
// first). Two statements, not one with a data-modifying WITH: on a cluster
// an INSERT inside a WITH is planned as a step of its own on the
// coordinator, where two plain inserts of one organization are each
// routed to its shard. Both take the transaction's now(), the same
// instant. Their parameters are named (pgx.StrictNamedArgs).
const savedSearchInsert = `
INSERT INTO agent.saved_searches AS s
	(id, organization_id, name, brief, created_by, created_at, updated_at)
VALUES (@id::uuid, @org::uuid, @name::text, @brief::jsonb, @created_by::text, now(), now())
RETURNING s.id, s.organization_id, s.name, s.brief, s.version, s.created_at, s.updated_at`

const baselineInsert = `
INSERT INTO agent.saved_search_baselines AS b (saved_search_id, organization_id, items, cursor, updated_at)
VALUES (@id::uuid, @org::uuid, @items::text[], @cursor::text, now())
RETURNING b.items, b.cursor`

// savedSearchGet reads a live saved search with its baseline, in one
// statement and so from one snapshot of both tables. $1 org, $2 id.
const savedSearchGet = `
SELECT ` + savedSearchColumns + `
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL`

// savedSearchList reads a page of live saved-search summaries, newest
// first, after the position ($2 created_at, $3 id); NULLs mean before every
// row. It reads the stored sizes and the query (cut to MaxQueryLen
// characters, which every write has held it to), never the filters or the
// baseline items. $1 org, $4 limit.
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

// savedSearchChanged is whether savedSearchUpdate's values differ from the
// stored ones. The brief is compared as jsonb text, which ignores key order
// and white space but keeps a number as written, as the stored brief does.
const savedSearchChanged = `(coalesce($3::text, s.name) IS DISTINCT FROM s.name
	OR coalesce($4::jsonb, s.brief)::text IS DISTINCT FROM s.brief::text)`

// savedSearchUpdate sets the name and brief (NULL keeps the stored value).
// The clock is joined in as a function in FROM, a column of the CASE:
// Citus refuses now() inside a CASE of a data-modifying statement, and
// plans a subquery in its FROM as a step of its own (agent.clock(NULL) is
// now(); migration 00019).
// It is a set-to-value write, so it bumps the version and updated_at only
// when a value changes: a repeat of it changes nothing further. It is also
// the first statement of a baseline replace, with both NULL: its row lock
// orders every writer of the saved search, which is what keeps a reader's
// brief and baseline from mixing. $1 org, $2 id, $3 name, $4 brief.
const savedSearchUpdate = `
UPDATE agent.saved_searches AS s
SET name = coalesce($3::text, s.name),
	brief = coalesce($4::jsonb, s.brief),
	version = s.version + CASE WHEN ` + savedSearchChanged + ` THEN 1 ELSE 0 END,
	updated_at = CASE WHEN ` + savedSearchChanged + ` THEN c.now ELSE s.updated_at END
FROM agent.clock(NULL) AS c(now)
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL
RETURNING s.id, s.organization_id, s.name, s.brief, s.version, s.created_at, s.updated_at`

// baselineGet reads a baseline. Run after savedSearchUpdate in the same
// transaction, it sees the baseline no other writer can change until commit.
// $1 org, $2 saved_search_id.
const baselineGet = `
SELECT b.items, b.cursor FROM agent.saved_search_baselines b
WHERE b.organization_id = $1 AND b.saved_search_id = $2`

// baselineReplace sets the whole baseline and bumps the saved search's
// version, when the baseline differs from the stored one; when it does not,
// it writes nothing and returns no row: a repeat of a replace changes nothing
// further. Run after savedSearchUpdate, which holds the saved search's row
// lock. $1 org, $2 saved_search_id, $3 items, $4 cursor.
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

// savedSearchGetAny reads a saved search, live or archived, with its
// baseline and archived_at. $1 org, $2 id.
const savedSearchGetAny = `
SELECT ` + savedSearchColumns + `, s.archived_at
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2`

// savedSearchListArchived reads a page of archived saved searches as
// savedSearchList reads the live ones, newest first by creation, with
// archived_at. $1 org, $2 created_at, $3 id, $4 limit.
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

// savedSearchLockGet is savedSearchGet holding the saved search's row lock
// until the transaction ends, for a change computed from what it read
// (Store.UpdateFunc): every other writer of the saved search waits on it.
// $1 org, $2 id.
const savedSearchLockGet = savedSearchGet + `
FOR UPDATE OF s`

// savedSearchLockVersion locks a live saved search and reads its version,
// for a change with a precondition on it. $1 org, $2 id.
const savedSearchLockVersion = `
SELECT s.version FROM agent.saved_searches s
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL
FOR UPDATE`
