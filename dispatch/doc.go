// Package dispatch hands admitted Runs to the runtime that executes them,
// exactly once in effect: an outbox and a dispatcher.
//
// The outbox is agent.run_dispatches. The statement that admits a Run
// (runs.runInsert) also inserts its pending dispatch, so the dispatch
// commits exactly when the Run does, whichever flow admitted it (a direct
// start, a saved-search start, a replayed preparation): no admitted Run
// lacks one, and none exists for a Run that was not admitted.
//
// A [Dispatcher] runs in every `searchd serve`. It leases due dispatches in
// bounded batches ([Store.LeasePass], FOR UPDATE SKIP LOCKED, so replicas
// share the work and never wait on each other) and POSTs each to the
// runtime's URL as a Standard Webhooks message ([Message]), signed with the
// runtime's secret. Its webhook-id is the Run id, the same on every
// redelivery, and its body is the same bytes on every redelivery (the Run
// and its frozen snapshot, which never change), so a runtime deduplicates
// by webhook-id: that is the key this boundary passes downstream, and it is
// what makes a retry safe.
//
// The answer decides: a 2xx marks the dispatch dispatched, and the Run
// dispatched when it was still queued; a 5xx, a 408, a 429, a timeout or a
// cut connection leaves it pending, due again after a backoff (honouring a
// Retry-After); any other answer (a 4xx, a redirect) marks it failed with
// the answer recorded, because sending the same request again cannot help:
// a person looks (`searchd runs dispatch list`) and may retry it once the
// cause is fixed ([Store.Retry], recorded with who and why). An uncertain
// delivery (no answer) is never taken for a success or a failure: it is
// delivered again.
//
// The lease is the fence. Leasing a dispatch increments its attempt count
// and pushes its due time one lease ahead; the end of an attempt is
// written only while the count still holds that attempt's number. A
// dispatcher that dies mid-delivery leaves its attempt in flight, and the
// dispatch is leased again once the lease has passed; one that stalls past
// its lease and wakes up finds its number gone and changes nothing (its
// attempt's own row still records the answer it got). The lease is longer
// than the delivery timeout ([LeaseFor]), so a live dispatcher never loses
// its lease to another mid-request.
//
// A [Watcher] runs in every `searchd serve` too, whether or not it
// dispatches: it reads the outbox's backlog ([Store.Stats], on partial
// indexes of the pending and failed rows) for the metrics and the
// console, and while its process does not dispatch and Runs are pending
// it says so with a WARN every few minutes: dispatch off is never silent.
//
// Cancel requests (agent.run_cancels, written by runs.Store.Cancel for a
// Run the runtime has or may have) travel the same way: leased in the same
// pass (first, as they are few), fenced by the same attempt number,
// signed with the same secret, retried with the same back-off. Their
// webhook-id is [CancelMessageID], their body a [CancelMessage]. A Run
// cancelled before it was delivered has its dispatch cancelled
// ([StateCancelled]) in the transaction that cancels it: never leased
// again, and an attempt in flight then ends without marking the Run
// dispatched, as its fence asks for a pending dispatch.
//
// Every attempt is recorded (agent.run_dispatch_attempts: the newest
// [KeptAttempts] of each dispatch), and with the Run's status changes
// (runs.Store.StatusChanges) they make the Run's timeline. Dispatch rows
// go with their Run: they cascade from agent.runs, which the sweeper
// empties after the Run's 396 days.
package dispatch
