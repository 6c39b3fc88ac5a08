// Package admission starts Runs: from a saved search
// ([Starter.StartSavedSearch]) or directly ([Starter.StartDirect]).
// See docs/idempotency.md.
//
// A saved-search start claims its Idempotency-Key, then in one transaction
// freezes a snapshot, completes the claim under its fence and admits the Run
// under a start key derived from the Idempotency-Key, so any retry yields one
// snapshot and one Run. The Run outlives the claim, so a start first looks
// for the Run under its start key.
package admission
