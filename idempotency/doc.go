// Package idempotency makes a repeated command have the effect of one, with
// claims in agent.idempotency_keys keyed by (organization, scope, key). See
// docs/idempotency.md.
//
// The first caller to [Service.Claim] a key owns it and ends it with
// [Service.Complete] (the answer repeats replay) or [Service.Release] (after
// a retryable failure); others get an [Outcome]. A claim has a lease, chosen
// per call, and a retention, fixed per scope by [Retention]. Complete and
// Release are fenced by the claim's lease token, so a worker whose lease was
// taken over writes nothing. All times come from the database clock.
package idempotency
