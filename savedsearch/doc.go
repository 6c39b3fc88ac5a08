// Package savedsearch owns saved searches: the mutable brief
// (agent.saved_searches) and baseline (agent.saved_search_baselines) a
// saved-search start freezes.
//
// Every change, archiving included, bumps saved_searches.version in the same
// transaction, and every writer locks the saved_searches row before touching
// the baseline, so a snapshot reads one consistent version. Archiving is the
// only deletion; archived and other organizations' saved searches answer
// [ErrNotFound].
package savedsearch
