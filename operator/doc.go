// Package operator is what an operator of the platform sees of the
// idempotency plane across organizations, and the one action an operator
// takes on it: the force-release of a stuck claim.
//
// A claim left processing by a worker that is gone is reclaimed by the
// next caller of its key once its lease passes; nothing is lost by
// waiting. But a key nobody retries stays processing until its retention
// ends, and an operator facing one may release it so that the next attempt
// runs afresh. [Store.ForceRelease] holds the rules both `searchd claims
// release` and the console follow: a completed claim is never released (it
// is the stored answer every repeat of its key replays), the delete is
// fenced by the lease token just read (a claim that moved on is left
// alone), and who released it and why is recorded in agent.claim_releases
// in the same transaction.
//
// The reads ([Store.Overview], [Store.InFlight], [Store.Stuck],
// [Store.Releases]) span every organization: they serve
// the operator views alone, which an organization's token never reaches.
// Lease and retention are judged by the database clock.
package operator
