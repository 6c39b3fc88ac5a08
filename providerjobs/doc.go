// Package providerjobs tracks jobs searchd started at outside providers
// (agent.provider_jobs) and applies the providers' signed callbacks to them.
// See docs/webhooks.md.
//
// A job is registered per organization under the provider's job id.
// Callbacks are posted to a path holding [Job.ID], which
// agent.provider_job_directory resolves to the organization; the body must
// name the same provider job id.
//
// [Service.Receive] applies each delivery at most once and never loses one it
// acknowledged: it lands the delivery in agent.provider_inbox, committed
// before any answer, then applies it at once or leaves it to any replica's
// applier ([Service.RunApplier]). The apply claims the delivery in scope
// webhook.<provider> and, in one transaction, updates the job, completes the
// claim and finishes the arrival. Updates set values and succeeded and
// failed are terminal, so a late delivery cannot move a job backwards.
//
// Only a failure to land is an error; every later ending is an [Outcome],
// acknowledged. Drops are recorded in agent.webhook_drops and kept, with
// finished arrivals, for [DropRetention].
package providerjobs
