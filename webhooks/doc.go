// Package webhooks delivers a Run's events to its organization's webhook
// endpoints (docs/webhooks.md): the endpoints (agent.webhook_endpoints),
// their outbox of deliveries (agent.webhook_deliveries, written by the
// statement that changes the Run: internal/runevents) and the [Worker]
// every serve runs, which leases due deliveries with a fenced lease, POSTs
// each as a Standard Webhooks message signed with the endpoint's secret,
// retries with capped exponential back-off, keeps a Run's events in order
// per endpoint, and disables an endpoint that failed for longer than its
// window.
package webhooks
