// Package dispatch hands admitted Runs to the runtime, exactly once in
// effect, through an outbox (agent.run_dispatches) that runs.runInsert
// fills in the statement admitting each Run. docs/runtime.md describes the
// protocol.
//
// A [Dispatcher] leases due dispatches ([Store.LeasePass]) and POSTs each
// as a signed Standard Webhooks [Message] whose webhook-id (the Run id) and
// body never change, so the runtime can deduplicate redeliveries. The
// lease is a fence: leasing increments the attempt count, and an attempt's
// end is written only while the count still holds its number. Cancel
// requests (agent.run_cancels) travel the same way. A [Watcher] reads the
// backlog ([Store.Stats]) for the metrics.
package dispatch
