// Package providerjobs owns agent.provider_jobs, the jobs searchd started at
// outside providers for its Runs, and the processing of the providers'
// callbacks about them.
//
// A job is registered under the provider's id of it, which names one job
// of an organization: registering the same (provider, provider job id)
// again in the same organization for the same Run is a retry (the
// existing job is returned), for another Run a conflict
// ([ErrAlreadyRegistered], nothing written). Another organization's jobs
// play no part: two organizations may register the same id (providers
// that number jobs per account hand the same ids to many customers), each
// gets its own job, and neither's registration tells the other anything.
// A job is also addressed by searchd's own id, [Job.ID], a random UUID
// that only the registering organization learns: it hands the provider
// the callback path that holds it (/v1/callbacks/<provider>/jobs/<id> at
// the HTTP edge). The provider job directory
// (agent.provider_job_directory) holds one entry per job, by that id, with
// the job's organization and provider job id: how a callback, which names
// no organization, finds its job on a cluster sharded by organization.
//
// When two organizations hold the same provider job id, a signed body
// naming it fits both jobs (the signature covers the delivery id, its
// timestamp and the body, not the path), and the path decides: the
// delivery is about the job whose path it was posted on. Arrivals and
// their claims are keyed per organization, so a copy posted on one
// organization's path never consumes, blocks or changes the other's: each
// job gets the deliveries posted on its own path, and only those.
//
// A provider reports progress by calling back once per change, and it
// redelivers whatever it thinks was not received. So a callback is a
// delivery with an id of its own (webhook-id at the HTTP edge), and the
// same delivery may arrive any number of times, concurrently, or long after
// a newer one. The caller authenticates a delivery before it gets here
// (the HTTP edge checks a signature over the delivery id, its timestamp and
// the body). [Service.Receive] makes every delivery take effect at most
// once, and never loses one it acknowledged, in two stages:
//
//  0. It resolves the job its path names through the directory: one
//     lookup by the job's id, the tenant before anything else. A path
//     naming no job of the provider drops as [DropUnknownJob]; a body
//     naming another provider job id than the path's job was registered
//     under as [DropJobMismatch], recorded under that job and its
//     organization. So a delivery is applied only to a job that both its
//     path (known to the job's organization and its provider alone) and
//     its signed body name. Neither drop is landed, so a delivery posted
//     to the wrong path first is still applied when it arrives on its
//     own. Then it lands the delivery in the inbox
//     (agent.provider_inbox), in the job's organization, under its
//     identity (provider, delivery id), with the path it arrived on, the
//     job, the body's parsed content and hash, and commits it before
//     anything is answered. A delivery whose identity is stored already is
//     a copy: it drops as [DropDuplicate] or [DropHashMismatch] (another
//     body), is counted on the arrival rather than stored again, and is
//     answered at once, whatever the arrival's apply is doing. Then the arrival is applied, right away by the handler that
//     landed it (the fast path), or later by the applier of any replica
//     ([Service.RunApplier], [Service.ApplyPending]) once the handler's
//     lease on it has passed: a handler that crashed, stalled or failed.
//
// The apply is what a delivery always went through:
//
//  1. It claims the delivery in scope webhook.<provider>, keyed by the
//     delivery id, with the hex SHA-256 of the raw body as the request
//     hash and the delivery's lease ([Config.Lease]). A processing claim
//     (a live worker) leaves the arrival pending for a later attempt; a
//     completed one (applied before the inbox existed) drops as
//     [DropDuplicate]; one for a different body as [DropHashMismatch].
//  2. A claimed delivery is applied, its claim completed and its arrival
//     finished in one transaction. The update is a set-to-value, never an
//     increment: the job takes the delivery's status and result, except
//     that succeeded and failed are terminal, so a late or repeated
//     delivery cannot move a job backwards. If the claim's fence moved on
//     meanwhile, the transaction rolls back: another worker owns it now.
//     Any other failure releases the claim and leaves the arrival pending,
//     retried after a backoff.
//
// At an HTTP edge a duplicate is not an error. The edge is the outermost
// frame, and a 5xx would tell the provider that a delivery which was handled
// failed (some providers disable an endpoint that answers 5xx often). So
// every ending after the landing is an [Outcome], answered with an
// acknowledgement; only a failure to land is an error, and the provider
// redelivers after it.
//
// Every drop is recorded with its reason: on the arrival, and in the drop
// audit agent.webhook_drops (once per arrival and reason: the next copies
// are counted on the arrival alone), and counted through the [Observer],
// so the audit and the metrics both see it. A failed audit write is logged
// and counted ([InboxObserver]) and never changes the answer. The audit
// keeps a drop, and the inbox a finished arrival, for [DropRetention] (30
// days) after it was received; the sweeper deletes them then.
package providerjobs
