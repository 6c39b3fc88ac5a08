// Package admission starts Runs: from a saved search
// ([Starter.StartSavedSearch]) or directly, for a capability or a definition
// ([Starter.StartDirect]). See docs/idempotency.md.
//
// A direct start is only the agent.runs insert; its unique start key is the
// admission.
//
// A saved-search start must freeze its input first. It claims the
// Idempotency-Key in scope surface.saved_search.start (committed on its own,
// so a crash leaves it reclaimable), then in one transaction freezes a
// snapshot, completes the claim under its fence and admits the Run: all
// three exist together or not at all. The start key is derived from the
// Idempotency-Key, so any retry yields one snapshot and one Run.
//
// The claim is kept 24 hours, the Run 396 days, so a start first looks for
// the Run under its start key and replays it whatever the claim says.
package admission
