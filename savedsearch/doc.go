// Package savedsearch owns saved searches: the mutable tables a
// saved-search start freezes its input from.
//
// A saved search has a brief (agent.saved_searches: name, query, filters)
// and a baseline (agent.saved_search_baselines: results already seen).
// Every change to either, and archiving, bumps saved_searches.version in the
// same transaction, and every writer locks the saved_searches row before
// touching the baseline, so a snapshot can read one consistent version.
//
// Archiving is the only deletion: the row stays for snapshots and Runs, but
// reads answer [ErrNotFound]. Another organization's saved search also
// answers [ErrNotFound].
package savedsearch
