// Package snapshot freezes a saved search's input for a Run.
//
// [Freeze] reads the brief, the baseline and their version in one statement,
// so the copy is consistent (writers change all three in one transaction).
// Snapshots are immutable (a trigger refuses UPDATE) and kept while a Run
// refers to one.
package snapshot
