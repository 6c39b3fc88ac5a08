// Package runevents holds the one INSERT that turns a change of a Run into
// its webhook deliveries (agent.webhook_deliveries, migration 00027): every
// statement that changes a Run (runs' admission and status report,
// dispatch's queued -> dispatched, the cancel) runs it in the transaction
// of the change, so an event exists exactly when its change commits.
// Package webhooks delivers the rows.
package runevents

// typeExpr is the SQL expression of an event's type from a Run row r of
// the source: run.admitted for version 1, else run.<status>.
const typeExpr = `CASE WHEN r.version = 1 THEN 'run.admitted' ELSE 'run.' || r.status END`

// InsertFrom returns the INSERT of the deliveries of the Runs that src
// yields, one per enabled endpoint of the Run's organization that is
// subscribed to the event's type. src is a FROM item aliased r with the
// columns id, organization_id, version, status, changed_at, result_ref,
// error_code and error_message: the Runs as the change left them. The
// statement names the organization as the named parameter @org (so a
// cluster routes it to the organization's shard). An endpoint created
// after the change gets none, and a delivery already written conflicts
// and is not written again: a statement that runs it for a Run that did not
// change in this transaction (a status report that changed nothing) writes
// nothing.
//
// It is an INSERT of its own, for a statement list in one transaction
// (runs), and a data-modifying WITH's step (dispatch).
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

// RunSource is the FROM item of [InsertFrom] that reads Run @id of @org as
// it is now, for a statement that runs after the change in its transaction.
const RunSource = `(SELECT r.id, r.organization_id, r.version, r.status,
	coalesce(r.updated_at, r.created_at) AS changed_at, r.result_ref, r.error_code, r.error_message
	FROM agent.runs r WHERE r.organization_id = @org::uuid AND r.id = @id::uuid) r`

// Insert is [InsertFrom] of [RunSource]: the deliveries of Run @id of
// @org's latest change, queued after the statement that made it. Its
// parameters are named: @org and @id.
var Insert = InsertFrom(RunSource)
