// Package runevents builds the INSERT that queues a Run change's webhook
// deliveries. Every statement that changes a Run runs it in the same
// transaction, so an event exists exactly when its change commits; package
// webhooks delivers the rows.
package runevents

// typeExpr is the event type of Run row r: run.admitted for version 1,
// else run.<status>.
const typeExpr = `CASE WHEN r.version = 1 THEN 'run.admitted' ELSE 'run.' || r.status END`

// InsertFrom returns the INSERT of one delivery per subscribed, enabled
// endpoint for each Run src yields. src is a FROM item aliased r with
// columns id, organization_id, version, status, changed_at, result_ref,
// error_code and error_message. The statement takes @org, so a cluster
// routes it to the organization's shard. Deliveries already written
// conflict and are skipped, so running it for an unchanged Run writes
// nothing.
func InsertFrom(src string) string {
	return `
INSERT INTO agent.webhook_deliveries
	(organization_id, endpoint_id, run_id, seq, type, status, occurred_at, result_ref, error_code, error_message,
	 next_attempt_at, created_at)
SELECT e.organization_id, e.id, r.id, r.version, ` + typeExpr + `, r.status, r.changed_at,
	r.result_ref, r.error_code, r.error_message, r.changed_at, r.changed_at
FROM ` + src + `
JOIN agent.webhook_endpoints e ON e.organization_id = r.organization_id
WHERE e.organization_id = @org::uuid AND e.state = 'enabled' AND e.created_at <= r.changed_at
	AND (e.event_types IS NULL OR ` + typeExpr + ` = ANY(e.event_types))
ON CONFLICT DO NOTHING`
}

// RunSource is an [InsertFrom] source reading Run @id of @org as it is now.
const RunSource = `(SELECT r.id, r.organization_id, r.version, r.status,
	coalesce(r.updated_at, r.created_at) AS changed_at, r.result_ref, r.error_code, r.error_message
	FROM agent.runs r WHERE r.organization_id = @org::uuid AND r.id = @id::uuid) r`

// Insert queues the deliveries of Run @id of @org's latest change; run it
// after the change, in its transaction.
var Insert = InsertFrom(RunSource)
