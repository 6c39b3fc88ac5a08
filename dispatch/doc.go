// Package dispatch hands admitted Runs to the runtime, exactly once in
// effect, through an outbox (agent.run_dispatches) and a [Dispatcher].
// docs/runtime.md describes the protocol.
//
// runs.runInsert inserts a Run's pending dispatch in the statement that
// admits it, so every admitted Run has exactly one. The dispatcher leases
// due dispatches with FOR UPDATE SKIP LOCKED ([Store.LeasePass]) and POSTs
// each as a signed Standard Webhooks [Message] whose webhook-id (the Run
// id) and body are the same on every redelivery, so the runtime can
// deduplicate. A 2xx marks it dispatched; a 5xx, 408, 429, timeout or cut
// connection retries it after a back-off; any other answer marks it failed
// until an operator retries it ([Store.Retry]).
//
// The lease is a fence: leasing increments the attempt count, and an
// attempt's end is written only while the count still holds its number, so
// a dispatcher that stalled past its lease changes nothing. The lease
// outlasts the delivery timeout ([LeaseFor]).
//
// Cancel requests (agent.run_cancels) go the same way, leased first in each
// pass; their webhook-id is [CancelMessageID]. A [Watcher] reads the
// backlog ([Store.Stats]) for the metrics and warns while Runs are pending
// and its process does not dispatch.
package dispatch
