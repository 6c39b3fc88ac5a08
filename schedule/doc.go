// Package schedule starts saved searches on a schedule: an interval, or a
// cron expression in a time zone, from a start time, with a catch-up window.
// Each time a schedule comes due is an occurrence, which a [Drain] starts
// through the normal saved-search start (admission.Starter). See
// docs/schedules.md.
//
// An occurrence is a row unique by (organization, saved search, due time), so
// it exists once however many drains plan it. Its start carries an
// Idempotency-Key derived from that key ([IdempotencyKey]), so it admits at
// most one Run even when drains race or crash. Drains take occurrences with
// FOR UPDATE SKIP LOCKED under a fenced lease.
//
// Every occurrence ends in one outcome: started, refused (with a reason), or
// missed (due longer ago than its catch-up window, because a very late start
// is worse than none). A transient failure records not_ready and retries an
// hour later until the window passes. A paused schedule produces no
// occurrences, and resuming does not back-fill. All times come from the
// database clock ([dbclock]).
package schedule
