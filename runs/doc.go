// Package runs owns agent.runs and Run admission.
//
// Admission is the insert: agent.runs has a unique index on
// (organization_id, start_key), and [Store.Admit] inserts with ON CONFLICT DO
// NOTHING, so of any number of concurrent starts with one key exactly one
// inserts and every other gets that Run back. The Run is the effect, and it
// is a row searchd owns, so it needs no claim in agent.idempotency_keys: the
// row is its own claim, and it is remembered as long as the Run is.
//
// Each Run stores the hash of the request that admitted it. A start that
// reuses a key for a different request gets [ErrKeyReused] instead of a Run
// it did not ask for.
//
// Start keys live in two namespaces, built by [SavedSearchStartKey] and
// [DirectStartKey], so one Idempotency-Key sent to both surfaces names two
// Runs rather than colliding. A Run is kept until retain_until, its creation
// plus [Retention] (396 days); within it the start key replays it.
package runs
