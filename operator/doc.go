// Package operator serves the operator's cross-organization views of
// idempotency claims and the one action on them: force-releasing a stuck
// claim.
//
// A claim whose worker is gone is reclaimed by the next caller once its
// lease passes, but a key nobody retries stays processing until retention
// ends. [Store.ForceRelease] holds the rules both `searchd claims release`
// and the console follow: a completed claim is never released (repeats
// replay it), the delete is fenced by the lease token just read, and the
// release is recorded in agent.claim_releases in the same transaction.
// The reads span every organization and serve operator views alone.
package operator
