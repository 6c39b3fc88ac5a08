// Package sweeper deletes rows past their retention: expired idempotency
// claims, Runs past retain_until (their parts go by ON DELETE CASCADE),
// orphan snapshots, old webhook drops and inbox arrivals, and the other
// tables listed in [Report.Tables]. docs/idempotency.md#the-sweeper
// describes the passes, the duty, the budget and the schedule.
//
// A pass reads at most Bound rows of one table, oldest first, with FOR
// UPDATE SKIP LOCKED, and deletes by ctid those still past retention, in
// one short transaction: it never waits on a writer, and sweepers running
// at once (replicas, `searchd sweep` jobs) take disjoint batches, so each
// row is deleted once. The read count says whether the sweep keeps up (a
// full read left rows behind); the delete count says what went.
//
// Time comes from the database unless [Config.Clock] stubs it (package
// dbclock), so every replica judges retention by one clock.
package sweeper
