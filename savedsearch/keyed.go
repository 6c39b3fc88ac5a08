package savedsearch

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/idempotency"
)

// createHashDomain is stored in claims, so it must not change.
const createHashDomain = "searchd.saved_search.create.v1"

// CreateOnce creates p at most once per idempotency key, the insert and the
// claim's completion committing together, and reports whether this call
// created it; a repeat returns the saved search as it is now (archived too).
// Errors: those of [Store.Create], [idempotency.ErrKeyReused], and
// [*idempotency.InFlightError] while the first request is in flight.
func (s *Store) CreateOnce(ctx context.Context, plane *idempotency.Service, org uuid.UUID, key string, p CreateParams) (_ *SavedSearch, created bool, err error) {
	if p.Baseline.Items == nil {
		p.Baseline.Items = []string{} // omitted and empty ask for the same
	}
	hash, err := idempotency.RequestHash(createHashDomain, struct {
		Name     string   `json:"name"`
		Brief    Brief    `json:"brief"`
		Baseline Baseline `json:"baseline"`
	}{p.Name, p.Brief, p.Baseline})
	if err != nil {
		return nil, false, err
	}
	var ss *SavedSearch
	id, first, err := plane.CreateOnce(ctx, s.db, idempotency.KeyedCreate{
		Org: org, Scope: idempotency.ScopeSavedSearchCreate, Key: key, RequestHash: hash, ResourceType: "saved_search",
	}, func(ctx context.Context, tx pgx.Tx) (string, error) {
		made, err := s.CreateIn(ctx, tx, org, p)
		if err != nil {
			return "", err
		}
		ss = made
		return made.ID.String(), nil
	})
	if err != nil {
		return nil, false, err
	}
	if first {
		return ss, true, nil
	}
	ssID, err := uuid.Parse(id)
	if err != nil {
		return nil, false, fmt.Errorf("savedsearch: the claim names saved search %q: %w", id, err)
	}
	ss, err = s.GetAny(ctx, org, ssID)
	return ss, false, err
}
