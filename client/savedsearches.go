package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
)

// errEmptyID refuses a call naming no resource, which would otherwise
// address another route.
var errEmptyID = errors.New("client: the id is empty")

// CreateSavedSearch creates a saved search, at version 1. It carries an
// Idempotency-Key, minted per call unless [WithIdempotencyKey] gives one,
// and reuses it on every retry, so it is retried like a start: however
// many attempts it makes, the key creates one saved search (a repeat
// answers the one the first attempt created). Errors: [ErrValidation] and
// the other 4xx sentinels; [ErrKeyReused] for a key given with another
// body.
func (c *Client) CreateSavedSearch(ctx context.Context, p CreateSavedSearchParams, opts ...StartOption) (*SavedSearch, error) {
	r, err := keyedRequest(http.MethodPost, "/v1/saved-searches", p, opts)
	if err != nil {
		return nil, err
	}
	var ss SavedSearch
	if _, err := c.call(ctx, r, &ss); err != nil {
		return nil, err
	}
	return &ss, nil
}

// GetSavedSearch reads a live saved search. It returns [ErrNotFound] for
// one that does not exist, belongs to another organization or is archived
// (read those with [Client.GetArchivedSavedSearch]).
func (c *Client) GetSavedSearch(ctx context.Context, id string) (*SavedSearch, error) {
	return c.getSavedSearch(ctx, id, "")
}

// GetArchivedSavedSearch reads a saved search whether it is archived or
// not (ArchivedAt says which): the start of an archived one's audit trail.
func (c *Client) GetArchivedSavedSearch(ctx context.Context, id string) (*SavedSearch, error) {
	return c.getSavedSearch(ctx, id, "?archived=true")
}

func (c *Client) getSavedSearch(ctx context.Context, id, query string) (*SavedSearch, error) {
	if id == "" {
		return nil, errEmptyID
	}
	var ss SavedSearch
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/saved-searches/" + url.PathEscape(id) + query, safety: repeatable}, &ss); err != nil {
		return nil, err
	}
	return &ss, nil
}

// ListSavedSearches returns a page of the live saved searches, newest
// first. It returns [ErrValidation] for a limit out of range or a cursor
// the server did not write.
func (c *Client) ListSavedSearches(ctx context.Context, p ListParams) (*SavedSearchPage, error) {
	var page SavedSearchPage
	var q url.Values
	if p.Archived {
		q = url.Values{"archived": {"true"}}
	}
	path := "/v1/saved-searches" + listQuery(q, p.Limit, p.Cursor)
	if _, err := c.call(ctx, request{method: http.MethodGet, path: path, safety: repeatable}, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// UpdateSavedSearch changes the name and/or the brief and returns the
// saved search one version later. It is not retried once the request may
// have reached the server. With p.IfVersion it changes exactly that
// version (If-Match), so an edit made from a stale read is refused with
// [ErrPreconditionFailed], whose APIError's CurrentVersion says where the
// saved search is. Errors: [ErrNotFound], [ErrValidation] (also when p
// sets neither field), ErrPreconditionFailed.
func (c *Client) UpdateSavedSearch(ctx context.Context, id string, p UpdateSavedSearchParams) (*SavedSearch, error) {
	if id == "" {
		return nil, errEmptyID
	}
	r, err := newRequest(http.MethodPatch, "/v1/saved-searches/"+url.PathEscape(id), p, dialOnly)
	if err != nil {
		return nil, err
	}
	r.ifMatch = ifVersion(p.IfVersion)
	var ss SavedSearch
	if _, err := c.call(ctx, r, &ss); err != nil {
		return nil, err
	}
	return &ss, nil
}

// ReplaceBaseline replaces the whole baseline and returns the saved search
// one version later. It is not retried once the request may have reached
// the server: a repeat would count a second version. Errors:
// [ErrNotFound], [ErrValidation].
func (c *Client) ReplaceBaseline(ctx context.Context, id string, b Baseline) (*SavedSearch, error) {
	if id == "" {
		return nil, errEmptyID
	}
	r, err := newRequest(http.MethodPut, "/v1/saved-searches/"+url.PathEscape(id)+"/baseline", b, dialOnly)
	if err != nil {
		return nil, err
	}
	var ss SavedSearch
	if _, err := c.call(ctx, r, &ss); err != nil {
		return nil, err
	}
	return &ss, nil
}

// ArchiveSavedSearch archives a saved search: later reads and starts
// answer [ErrNotFound]; its snapshots and Runs stay readable. It returns
// ErrNotFound for one already archived, and is not retried once the
// request may have reached the server: after a lost answer, a repeat would
// say ErrNotFound of the archive it made.
func (c *Client) ArchiveSavedSearch(ctx context.Context, id string) error {
	if id == "" {
		return errEmptyID
	}
	_, err := c.call(ctx, request{method: http.MethodDelete, path: "/v1/saved-searches/" + url.PathEscape(id), safety: dialOnly}, nil)
	return err
}

// ListSnapshots returns a page of a saved search's snapshots, newest
// first, archived saved searches included. It returns [ErrNotFound] for a
// saved search the organization never had and [ErrValidation] for a limit
// out of range or a cursor the server did not write.
func (c *Client) ListSnapshots(ctx context.Context, savedSearchID string, p ListParams) (*SnapshotPage, error) {
	if savedSearchID == "" {
		return nil, errEmptyID
	}
	var page SnapshotPage
	path := "/v1/saved-searches/" + url.PathEscape(savedSearchID) + "/snapshots" + listQuery(nil, p.Limit, p.Cursor)
	if _, err := c.call(ctx, request{method: http.MethodGet, path: path, safety: repeatable}, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// GetSnapshot reads a snapshot. It returns [ErrNotFound] for one of
// another organization or none.
func (c *Client) GetSnapshot(ctx context.Context, id string) (*Snapshot, error) {
	if id == "" {
		return nil, errEmptyID
	}
	var snap Snapshot
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/snapshots/" + url.PathEscape(id), safety: repeatable}, &snap); err != nil {
		return nil, err
	}
	return &snap, nil
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
