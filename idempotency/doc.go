// Package idempotency is the plane every effect of searchd passes through:
// one durable PostgreSQL table, agent.idempotency_keys, and the rules that make
// a repeated command have the effect of one.
//
// A caller claims a key (organization, scope, key) for a request hash. The
// first caller owns the claim, does its work and ends the claim in exactly one
// of two ways: [Service.Complete] stores the answer every repeat replays, and
// [Service.Release] deletes an unfinished claim after a retryable failure so
// the next attempt runs. Every other caller reads an [Outcome] that says what
// it holds: completed (replay the stored answer), processing (another worker
// holds a live lease: retry later, never execute), conflict (the key was used
// for different content) or, from [Service.Read] alone, absent.
//
// Two clocks. The lease (lease_expires_at) says how long a worker may hold the
// key before another may reclaim it; it is the caller's operation timeout plus
// a margin, so it is an argument. The retention (retain_until) says how long
// the answer is remembered; it is a per-scope constant from [Retention]. One
// field cannot be both: long, a crashed worker blocks every retry; short, the
// journal forgets an effect and a retry repeats it.
//
// The fence. Every claim and reclaim carries a new lease token, and
// completion and release are conditional on it. A worker that stalled past its
// lease and wakes after another reclaimed the key writes nothing: its
// Complete answers false and its Release answers false, silently, and it must
// not retry.
//
// Time. Every comparison of leases and retention uses the database clock, so
// replicas whose clocks disagree still agree on who owns a key. Tests stub the
// clock through [Config.Clock] (a [dbclock.Clock]), which is passed into the
// SQL as coalesce($now, now()); production passes NULL.
//
// The [Repository] owns the atomic SQL; the [Service] owns duplicate
// semantics. Callers use the Service.
package idempotency
