// Package runs owns agent.runs and Run admission.
//
// Admission is an insert with ON CONFLICT DO NOTHING on the unique
// (organization_id, start_key) index, so of concurrent starts with one key
// exactly one inserts and the others get that Run: the Run row is its own
// idempotency claim, kept for [Retention]. A key reused for a different
// request gets [ErrKeyReused].
package runs
