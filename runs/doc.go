// Package runs owns agent.runs and Run admission.
//
// Admission is an insert with ON CONFLICT DO NOTHING on the unique
// (organization_id, start_key) index: of concurrent starts with one key,
// exactly one inserts and the others get that Run back. The Run row is its
// own idempotency claim. A start that reuses a key for a different request
// gets [ErrKeyReused]. Saved-search and direct starts use separate key
// namespaces ([SavedSearchStartKey], [DirectStartKey]). A Run, and so its
// start key's replay, is kept for [Retention].
package runs
