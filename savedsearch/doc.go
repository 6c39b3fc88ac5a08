// Package savedsearch owns saved searches: the mutable product tables a
// saved-search start freezes its input from.
//
// A saved search is split over two tables that change independently: the
// brief (agent.saved_searches: name, query, filters) and the baseline
// (agent.saved_search_baselines: the results already seen). Every change to
// either, and archiving, bumps saved_searches.version by one in the same
// transaction, and every writer locks the saved_searches row before it
// touches the baseline. That gives the snapshot package what it needs to
// freeze one consistent picture, and gives every picture a version to name.
//
// Archiving is the only deletion: an archived saved search answers
// [ErrNotFound] to every read here, but its row stays, because snapshots and
// Runs refer to it. Every method takes the organization and answers
// [ErrNotFound] for another organization's saved search, so a caller cannot
// learn that an id exists elsewhere.
package savedsearch
