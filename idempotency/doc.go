// Package idempotency makes a repeated command have the effect of one. It
// stores claims in agent.idempotency_keys, keyed by (organization, scope, key).
//
// The first caller to [Service.Claim] a key owns it and ends the claim with
// [Service.Complete], which stores the answer repeats replay, or
// [Service.Release], which deletes it after a retryable failure. Other callers
// get an [Outcome]: completed, processing (retry later), or conflict (the key
// was used for a different request).
//
// A claim has two clocks: a lease (how long a worker may hold it before
// another may reclaim it, chosen per call) and a retention (how long the
// answer is kept, fixed per scope by [Retention]). Each claim carries a lease
// token; Complete and Release succeed only with the current token, so a
// worker whose lease was taken over writes nothing. All times come from the
// database clock, so replicas agree on who owns a key.
package idempotency
