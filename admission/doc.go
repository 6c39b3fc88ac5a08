// Package admission runs the two ways a Run starts: from a saved search
// ([Starter.StartSavedSearch]) and directly, for a capability or a definition
// ([Starter.StartDirect]).
//
// A direct start is an insert into agent.runs and nothing else: the unique
// start key is the admission, and agent.idempotency_keys is not touched.
//
// A saved-search start must first freeze its input, a brief and a baseline
// from mutable tables, before it can build the Run request. That preparation
// is the one surface effect that goes through the idempotency plane: it
// claims the Idempotency-Key in scope surface.saved_search.start (a commit
// of its own, so a concurrent start sees the claim and a crash leaves it
// reclaimable), then, in ONE transaction, freezes a snapshot, completes the
// claim with it under its fence and admits the Run, so the snapshot, the
// completion and the Run exist together or not at all. The claim never
// records admission, dispatch or Run status: the Run is admitted like any
// other, by its insert under a start key derived from the Idempotency-Key,
// which is stable across every retry: crash anywhere and retry, and there
// is still one snapshot and one Run. A new start commits twice, in five
// round trips (the transaction's statements travel in two pgx batches).
//
// The two records are remembered for different times. The claim (and the
// snapshot as its response) answers for 24 hours; the Run for 396 days. So
// a start first looks for the Run under its start key, and replays it if it
// is there, whatever the claim says: a replay costs one statement and never
// writes a second snapshot.
package admission
