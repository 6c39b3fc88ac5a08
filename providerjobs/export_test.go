package providerjobs

import (
	"context"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/sqlarg"
)

// GetArrival returns the arrival of a delivery in org, or [ErrNotFound]:
// the tests' look-up of what a delivery left in the inbox.
func (s *Service) GetArrival(ctx context.Context, org uuid.UUID, provider, deliveryID string) (_ *InboxEntry, err error) {
	defer dberr.Annotate(&err)
	e, err := scanEntry(s.db.QueryRow(ctx, inboxGet, org, provider, deliveryID))
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "providerjobs: read the inbox")
	}
	return e, nil
}
