package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// CreateSavedSearch creates a saved search, at version 1. It carries an
// Idempotency-Key, minted per call unless [WithIdempotencyKey] gives one,
// and reuses it on every retry, so it is retried like a start: however
// many attempts it makes, the key creates one saved search (a repeat
// answers the one the first attempt created). Errors: [ErrValidation] and
// the other 4xx sentinels; [ErrKeyReused] for a key given with another
// body.
func (c *Client) CreateSavedSearch(ctx context.Context, p CreateSavedSearchParams, opts ...StartOption) (*SavedSearch, error) {
	return fetch[SavedSearch](ctx, c, keyed(newRequest(http.MethodPost, "/v1/saved-searches", p, repeatable), opts))
}

// GetSavedSearch reads a live saved search. It returns [ErrNotFound] for
// one that does not exist, belongs to another organization or is archived
// (read those with [Client.GetArchivedSavedSearch]).
func (c *Client) GetSavedSearch(ctx context.Context, id string) (*SavedSearch, error) {
	return fetch[SavedSearch](ctx, c, get("/v1/saved-searches/", id, ""))
}

// GetArchivedSavedSearch reads a saved search whether it is archived or
// not (ArchivedAt says which): the start of an archived one's audit trail.
func (c *Client) GetArchivedSavedSearch(ctx context.Context, id string) (*SavedSearch, error) {
	return fetch[SavedSearch](ctx, c, get("/v1/saved-searches/", id, "?archived=true"))
}

// ListSavedSearches returns a page of the live saved searches, newest
// first. It returns [ErrValidation] for a limit out of range or a cursor
// the server did not write.
func (c *Client) ListSavedSearches(ctx context.Context, p ListParams) (*SavedSearchPage, error) {
	var q url.Values
	if p.Archived {
		q = url.Values{"archived": {"true"}}
	}
	return fetch[SavedSearchPage](ctx, c, newRequest(http.MethodGet, "/v1/saved-searches"+listQuery(q, p.Limit, p.Cursor), nil, repeatable))
}

// UpdateSavedSearch changes the name and/or the brief and returns the
// saved search one version later. It is not retried once the request may
// have reached the server. With p.IfVersion it changes exactly that
// version (If-Match), so an edit made from a stale read is refused with
// [ErrPreconditionFailed], whose APIError's CurrentVersion says where the
// saved search is. Errors: [ErrNotFound], [ErrValidation] (also when p
// sets neither field), ErrPreconditionFailed.
func (c *Client) UpdateSavedSearch(ctx context.Context, id string, p UpdateSavedSearchParams) (*SavedSearch, error) {
	r := idRequest(http.MethodPatch, "/v1/saved-searches/", id, "", p, dialOnly)
	r.ifMatch = ifVersion(p.IfVersion)
	return fetch[SavedSearch](ctx, c, r)
}

// ReplaceBaseline replaces the whole baseline and returns the saved search
// one version later. It is not retried once the request may have reached
// the server: a repeat would count a second version. Errors:
// [ErrNotFound], [ErrValidation].
func (c *Client) ReplaceBaseline(ctx context.Context, id string, b Baseline) (*SavedSearch, error) {
	return fetch[SavedSearch](ctx, c, idRequest(http.MethodPut, "/v1/saved-searches/", id, "/baseline", b, dialOnly))
}

// ArchiveSavedSearch archives a saved search: later reads and starts
// answer [ErrNotFound]; its snapshots and Runs stay readable. It returns
// ErrNotFound for one already archived, and is not retried once the
// request may have reached the server: after a lost answer, a repeat would
// say ErrNotFound of the archive it made.
func (c *Client) ArchiveSavedSearch(ctx context.Context, id string) error {
	_, err := c.call(ctx, idRequest(http.MethodDelete, "/v1/saved-searches/", id, "", nil, dialOnly), nil)
	return err
}

// ListSnapshots returns a page of a saved search's snapshots, newest
// first, archived saved searches included. It returns [ErrNotFound] for a
// saved search the organization never had and [ErrValidation] for a limit
// out of range or a cursor the server did not write.
func (c *Client) ListSnapshots(ctx context.Context, savedSearchID string, p ListParams) (*SnapshotPage, error) {
	return fetch[SnapshotPage](ctx, c, get("/v1/saved-searches/", savedSearchID, "/snapshots"+listQuery(nil, p.Limit, p.Cursor)))
}

// GetSnapshot reads a snapshot. It returns [ErrNotFound] for one of
// another organization or none.
func (c *Client) GetSnapshot(ctx context.Context, id string) (*Snapshot, error) {
	return fetch[Snapshot](ctx, c, get("/v1/snapshots/", id, ""))
}

// ifVersion returns the If-Match of a version; "" for 0, none.
func ifVersion(v int64) string {
	if v == 0 {
		return ""
	}
	return `"` + strconv.FormatInt(v, 10) + `"`
}

// listQuery returns the query string of a list call ("" for none), with q's
// values and the limit and cursor when they are set.
func listQuery(q url.Values, limit int, cursor string) string {
	if q == nil {
		q = url.Values{}
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}
