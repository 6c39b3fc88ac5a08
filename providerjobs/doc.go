// Package providerjobs tracks jobs that searchd started at outside providers
// (agent.provider_jobs) and applies the providers' signed callbacks to them.
// See docs/webhooks.md.
//
// A job is registered per organization under the provider's job id; the same
// id registered again for the same Run returns the existing job, for another
// Run it is [ErrAlreadyRegistered]. Organizations never see each other's
// jobs, even with equal provider job ids. Callbacks are posted to a path
// holding searchd's random job id ([Job.ID]), which the directory
// (agent.provider_job_directory) resolves to the organization; the body must
// name the same provider job id.
//
// Providers redeliver, concurrently and out of order, so [Service.Receive]
// applies each delivery at most once and never loses one it acknowledged:
//
//  1. It resolves the job and lands the delivery in the inbox
//     (agent.provider_inbox) keyed by (provider, delivery id), committed
//     before any answer. A copy of a landed delivery is counted and dropped.
//  2. It applies the arrival at once, or the applier of any replica does so
//     later once the handler's lease has passed ([Service.RunApplier]). The
//     apply claims the delivery in scope webhook.<provider> and, in one
//     transaction, updates the job, completes the claim and finishes the
//     arrival. Updates set values, never increment, and succeeded and failed
//     are terminal, so a late delivery cannot move a job backwards.
//
// Only a failure to land is an error: every later ending is an [Outcome], so
// the HTTP edge acknowledges it rather than answering 5xx. Each drop is
// recorded in agent.webhook_drops and counted by the [Observer]; a failed
// audit write is logged, never answered. Drops and finished arrivals are kept
// for [DropRetention].
package providerjobs
