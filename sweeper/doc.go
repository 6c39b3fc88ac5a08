// Package sweeper enforces retention: it deletes what searchd has promised to
// remember only for a while, once that while has passed.
//
// Among the tables it sweeps, in the order of every run ([Report.Tables]):
//
//   - agent.idempotency_keys: a claim past retain_until. Nothing else deletes
//     a completed claim (Release removes only an unfinished one), because a
//     completed claim is the replay journal. Once its retention has passed no
//     replay can reach it: the plane already answers such a row as absent and
//     replaces it in place on the next claim, so the sweep changes no answer,
//     it only reclaims the space.
//   - agent.runs: a Run past retain_until (396 days, runs.Retention). Until
//     then its stable start key replays it. What is part of the Run goes
//     with it by ON DELETE CASCADE: its provider jobs, its dispatch to the
//     runtime with the attempts and operator retries (package dispatch),
//     and its status history. A pass's bound counts Runs; their parts are
//     few (at most dispatch.KeptAttempts attempts each).
//   - agent.saved_search_snapshots: a snapshot no Run refers to, that no
//     retained surface.saved_search.start claim names as its resource, and
//     that is older than [SnapshotMinAge]. The claim is what holds a snapshot
//     frozen for a start whose Run is not admitted yet; the age keeps every
//     snapshot a start may still be preparing or admitting. A snapshot whose
//     claim passed without a Run is an orphan, and goes. A pass looks
//     only at the oldest snapshots past the minimum age, four bounds of
//     them, where the snapshots of deleted Runs are (Runs are kept for one
//     retention from their admission, in the transaction that froze their
//     snapshot); an orphan frozen by a start retried after its claim had
//     expired goes when that window reaches it. A snapshot names its claim
//     (claim_id), so the claim is one probe of a primary key. Each round
//     sweeps the Runs before the snapshots, so the snapshots of Runs a
//     round deletes go in its own snapshot pass (once the snapshots are
//     drained for the run, in the next run).
//   - agent.webhook_drops: a dropped provider delivery received longer ago
//     than providerjobs.DropRetention (30 days). The drop audit is written
//     once and never read by the service, only by people: it is kept as
//     long as any claim its delivery could be compared with.
//   - agent.provider_inbox: a finished (applied or dropped) arrival of a
//     provider delivery received longer ago than the same 30 days, with its
//     copy counters. A pending arrival is never swept: it was acknowledged
//     and is not applied yet.
//
// Bounded passes. A pass reads at most Bound rows of one table, oldest first
// (the read count), then deletes those it read that are still past their
// retention (the delete count), in one short transaction. The delete finds
// its rows by the ctids the read returned, straight in the heap, not through
// the primary key. The read locks its
// rows with FOR UPDATE SKIP LOCKED, so a pass never waits on a claim, a
// reclaim or a completion holding a row; it skips that row, and the writer
// that meets a row of the batch waits for that one batch only. A row a
// claimer renewed before the pass read it no longer qualifies; one it tries
// to renew after waits, then finds it gone and inserts a fresh claim. Several
// replicas sweeping at once read disjoint batches, so each row is deleted
// once, and none of them errs.
//
// The two counts answer different questions. The read count says whether the
// sweep keeps up: a pass whose read fills its bound left rows behind. The
// delete count says what was removed. It is lower than the read only when a
// read row stopped qualifying before the delete: for claims and Runs the
// read's lock rules that out, and the delete's re-check of the retention is a
// second guard; for a snapshot the delete re-checks on a newer view than the
// read, and a Run or claim that came to refer to it in between keeps it.
//
// Passes per run. A run drains what is due: it sweeps the tables in rounds,
// one pass per table per round, and a table stays in the rounds while its
// passes read a full bound; a pass that reads less than Bound drains it.
// Round-robin rather than one table after another: a table with a huge
// backlog takes its turn with the others, so it cannot hold them off for a
// whole run, run after run; within a round the order keeps the
// dependencies (occurrences before their Runs, Runs before their
// snapshots). Between two passes, after a pass that read a full bound, the
// run rests in proportion to that pass, so that passes take at most
// [Config.Duty] of the run's time (a quarter by default). Back-to-back
// passes are cheap each but busy together: on a small database they take
// a core from the claim path and raise its tail latency; resting bounds
// that share, and a loaded database, whose passes run slower, gets longer
// rests by itself.
//
// The number of passes is not bounded; [Config.Budget] is (15 minutes by
// default): after the first round, which every run makes in full so that
// every table is swept by every run, a run makes no pass once its budget
// has passed. A table whose last pass still read a full bound is left with
// a backlog: flagged in the [Report] and logged as a warning. A run that
// drains its backlog within the budget warns of nothing; its full passes
// are counted ([TableReport.FullPasses], [BacklogObserver]) and its
// summary says how many.
//
// MaxBound guards against a Bound set by mistake so large that one pass
// would hold its table for long: [Config.Validate] refuses a Bound above MaxBound rather
// than clamping it, so a misconfiguration fails at start-up.
//
// Scheduling. [Sweeper.Run] is the in-process loop of `searchd serve`: it
// runs shortly after start (within Jitter); while a run leaves a backlog
// (its budget ran out) it starts the next at once, after only the rest the
// last pass asked for; once a run drained everything it waits as long as
// half a Bound took to come due at the pace that run found rows (at least
// [MinWait], at most Interval), plus a tenth of that at random, so
// replicas started together drift apart. A backlog is thus drained
// continuously, at the duty's pace; rows that keep coming due are swept
// about every half bound, so those past retention stay below one pass's
// bound; such a quick run sweeps only the tables the run before it deleted
// from, so a table with nothing due is not read every second; and every table is looked at at least every
// Interval. [Sweeper.RunOnce] is one run, for `searchd
// sweep` under an outside scheduler. Counts go to the [Report], to the log
// and to an [Observer], where metrics attach.
//
// Several replicas. Any number of sweepers (replicas' loops, `searchd
// sweep` jobs) may drain one backlog at once: each pass locks its batch
// with SKIP LOCKED, so their batches are disjoint, each row is deleted by
// one of them, and a sweeper whose read finds only rows another holds
// reads less than its bound and leaves the rest to that one.
//
// Time comes from the database unless [Config.Clock] stubs it, like the rest
// of searchd (see package dbclock): every replica judges retention by one
// clock.
package sweeper
