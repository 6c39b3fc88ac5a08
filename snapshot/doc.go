// Package snapshot freezes a saved search's input for a Run.
//
// [Freeze] reads the brief, the baseline and their version in one
// statement. A statement sees one MVCC snapshot and every writer changes
// both tables and the version in one transaction, so the copy is
// consistent. Snapshots (agent.saved_search_snapshots) are immutable: a
// trigger refuses UPDATE.
//
// A snapshot is the answer of a surface.saved_search.start claim and the
// record of what a Run started on; agent.runs' foreign key keeps it while a
// Run refers to it.
package snapshot
