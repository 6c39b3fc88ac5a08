// Package providerjobs owns agent.provider_jobs, the jobs searchd started at
// outside providers for its Runs, and the processing of the providers'
// callbacks about them.
//
// A provider reports progress by calling back once per change, and it
// redelivers whatever it thinks was not received. So a callback is a
// delivery with an id of its own (X-Delivery-Id at the HTTP edge), and the
// same delivery may arrive any number of times, concurrently, or long after
// a newer one. [Service.Receive] makes every delivery take effect at most
// once, through the idempotency plane, and never loses one silently:
//
//  1. It resolves the tenant first. A claim key is scoped to one
//     organization and a callback names none, only (provider, job id), so
//     the job is read from agent.provider_jobs before anything is claimed.
//     A path naming no job drops as [DropUnknownJob]; a body naming a
//     different job than the path drops as [DropJobMismatch].
//  2. It claims the delivery in scope webhook.<provider>, keyed by the
//     delivery id, with the hex SHA-256 of the raw body as the request
//     hash and the plane's webhook lease. A completed or a processing claim
//     drops as [DropDuplicate]: the effect is done, or in flight in a
//     healthy worker. A claim for a different body drops as
//     [DropHashMismatch]: the id already answers for other content, so the
//     delivery is neither a duplicate nor safe to apply.
//  3. A claimed delivery is applied and its claim completed in one
//     transaction. The update is a set-to-value, never an increment: the
//     job takes the delivery's status and result, except that succeeded and
//     failed are terminal, so a late or repeated delivery cannot move a job
//     backwards. If the claim's fence moved on meanwhile, the transaction
//     rolls back and the delivery drops as a duplicate: another worker owns
//     it now. Any other failure releases the claim, so the provider's
//     redelivery runs it.
//
// At an HTTP edge a duplicate is not an error. The edge is the outermost
// frame, and a 5xx would tell the provider that a delivery which was handled
// failed (some providers disable an endpoint that answers 5xx often). So
// every ending above is an [Outcome], answered with an acknowledgement; only
// a database failure is an error, and the provider redelivers after it.
//
// Every drop is written to agent.webhook_drops with its reason and counted
// through the [Observer], so the audit and the metrics both see it.
package providerjobs
