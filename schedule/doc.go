// Package schedule starts saved searches on a schedule: an interval, or a
// cron expression in a time zone, from a start time, with a catch-up window.
// A [Drain] starts each occurrence through admission.Starter. See
// docs/schedules.md.
//
// An occurrence is unique by (organization, saved search, due time) and its
// start's Idempotency-Key derives from that ([IdempotencyKey]), so it admits
// at most one Run however drains race or crash. Each ends started, refused
// or missed (due longer ago than its catch-up window); a transient failure
// is retried until the window passes. Resuming does not back-fill. All
// times come from the database clock.
package schedule
