package client

import (
	"context"
	"iter"
)

// SavedSearches iterates over the saved searches p selects (the live ones,
// or with p.Archived the archived ones), newest first, fetching one page
// at a time as the loop needs it, from p.Cursor on (p.Limit sizes the
// pages). A failed page ends the iteration with its error as the last
// pair; breaking out of the loop fetches nothing more.
//
//	for ss, err := range c.SavedSearches(ctx, client.ListParams{}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(ss.Name)
//	}
func (c *Client) SavedSearches(ctx context.Context, p ListParams) iter.Seq2[SavedSearchSummary, error] {
	return pages(func(cursor string) (*SavedSearchPage, error) {
		p.Cursor = cursor
		return c.ListSavedSearches(ctx, p)
	}, p.Cursor)
}

// Runs iterates over the Runs p selects, newest first, a page at a time,
// as [Client.SavedSearches] does.
func (c *Client) Runs(ctx context.Context, p ListRunsParams) iter.Seq2[RunListItem, error] {
	return pages(func(cursor string) (*RunPage, error) {
		p.Cursor = cursor
		return c.ListRuns(ctx, p)
	}, p.Cursor)
}

// pages yields the items of the pages fetch returns from cursor on, until
// a page has no next cursor.
func pages[T any](fetch func(cursor string) (*Page[T], error), cursor string) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			page, err := fetch(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range page.Items {
				if !yield(it, nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			cursor = page.NextCursor
		}
	}
}
