// Package schedule starts saved searches on their own: a saved search may
// carry a schedule (an interval, or a cron expression read in a time zone,
// from a start time, with a catch-up window), and every time it comes due
// is one occurrence that a drain starts through the normal saved-search
// start (admission.Starter), as a client's start would be.
//
// The discipline is the one the platform's outbound drains follow:
//
//   - An occurrence is a row unique by its natural key, (organization,
//     saved search, due time), in agent.schedule_occurrences. The database
//     decides that it exists once; a drain that plans it twice loses the
//     second insert to the key.
//   - Its start carries an Idempotency-Key derived from that key
//     ([IdempotencyKey]), so however many drains race on it, or crash
//     between the start and recording its outcome, it admits at most one
//     Run: a second start with the key replays the first's Run.
//   - Every `searchd serve` runs a [Drain]. Each tick it plans the
//     occurrences that came due and takes at most Batch of them, with FOR
//     UPDATE SKIP LOCKED and a lease whose token fences the outcome, so
//     replicas take disjoint rows and a replica stopped past its lease
//     records nothing.
//   - Each occurrence ends with one explicit outcome: started (with its
//     Run), refused (with a reason: the saved search archived, the
//     organization over its limits, the start invalid, the schedule paused
//     or removed), or missed (due more than the catch-up window ago:
//     closed and never started, because a very late start is worse than
//     none, and quietly retrying for ever is how that happens). A
//     transient failure records not_ready and is retried an hour later,
//     and only then; once past the catch-up window it is missed. Nothing
//     is retried for ever and nothing is left without an outcome.
//   - A paused schedule produces no occurrences, and resuming starts from
//     the next time it comes due: nothing that fell due while it was
//     paused is back-filled.
//
// Occurrences are kept as long as their Run (runs.Retention) and swept by
// the sweeper. Every time is the database clock's ([dbclock]).
package schedule
