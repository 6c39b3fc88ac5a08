// Package toolrun runs the agent's tool calls through the idempotency plane,
// so that a call's effect happens once however often the orchestrator
// replays the step that makes it. The agent runtime imports it; the server
// does not (it reads the same journal through package tools, and records a
// person's resolution of an uncertain call with [tools.Resolver]).
//
// Every effectful tool call of a Run is one claim in scope "tool.<name>" of
// agent.idempotency_keys, and the completed claims are the Run's replay
// journal: a restarted segment that proposes the same call again reads back
// what the earlier attempt did instead of doing it again. No second table
// holds that history, and this package holds no idempotency logic of its own;
// it derives keys and decides how each ending of a call maps onto the plane's
// [idempotency.Service].
//
// The key. [Key] derives a call's key from the Run id, the tool name, the
// canonical input and the occurrence of that same call in the Run, never from
// the model's tool-call id: a restarted segment makes the model mint new ids,
// and a key built on them would miss the earlier claim and repeat the effect.
// The occurrence keeps two genuine, identical calls of one Run apart;
// [Occurrences] counts it.
//
// The path, in [Runner.Execute]: read the journal, ask the policy
// checkpoint, claim with the lease [ToolSpec.Lease] and call the tool with
// its timeout (passing the key to a vendor that honours one), and end the
// claim. A completed answer is replayed without asking the policy: the call
// was allowed, and made, before. A call that needs a person's approval
// claims nothing: a claim taken then would sit processing for a whole lease
// and block the resumed call. Success and business failures (not_found,
// invalid_input) complete the claim, so a repeat returns the same answer; a
// retryable failure releases it, so the next attempt executes. A call to a
// vendor without idempotency support that ended without an acknowledgement
// completes as [OutcomeUncertain]: the message may or may not have gone
// out, and an automatic retry is a coin flip between a duplicate and a
// delivery, so the answer is surfaced and never retried. A person resolves
// it with [tools.Resolver]: delivered (the answer becomes a success naming them)
// or one retry with the same key.
//
// Every answer is fitted under the plane's store limit before it is stored
// (see [MaxStoredOutput]), so a replay answers exactly what the live call
// did at every output size, and a completion is never refused.
//
// Postgres cannot commit atomically with a vendor. The claim stops concurrent
// local execution; the vendor's idempotency key covers a worker that crashed
// after the vendor accepted and before the claim completed, because the
// retry that reclaims the key sends the same key again. A vendor without one
// has no such cover, so a reclaimed call to it is completed as uncertain
// instead of being sent again.
package toolrun
