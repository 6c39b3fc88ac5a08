// Package snapshot freezes a saved search's input for a Run.
//
// A saved search's brief and baseline live in two tables and may change at
// any moment. A start must not run on a brief from one moment and a baseline
// from another, so [Freeze] reads both, and the version they carry, in ONE
// statement: PostgreSQL gives a statement one MVCC snapshot, and every writer
// of a saved search changes both tables and the version in one transaction,
// so the statement sees all of a change or none of it. The snapshot it
// writes to agent.saved_search_snapshots is immutable (a trigger refuses
// UPDATE) and names the version it copied.
//
// A snapshot is the response a completed surface.saved_search.start claim
// stores (see the admission package) and the audit record of what a Run was
// started on: it outlives the claim's 24 hours and its saved search's
// archive, and the foreign key from agent.runs keeps it while a Run refers
// to it.
package snapshot
