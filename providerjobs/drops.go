package providerjobs

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
)

// Drop is one dropped delivery of a job, from agent.webhook_drops.
type Drop struct {
	ID uuid.UUID `json:"id"`
	// DeliveryID is the delivery's webhook-id.
	DeliveryID string     `json:"delivery_id"`
	Reason     DropReason `json:"reason"`
	// RequestHash is the hex SHA-256 of the raw body.
	RequestHash string    `json:"request_hash"`
	ReceivedAt  time.Time `json:"received_at"`
}

// MaxDropsListed bounds the drops [Service.ListDrops] returns.
const MaxDropsListed = 500

// ListDrops returns the newest drops (at most [MaxDropsListed]) of job id of
// org, or [ErrNotFound].
func (s *Service) ListDrops(ctx context.Context, org, id uuid.UUID) (_ []Drop, err error) {
	defer dberr.Annotate(&err)
	job, err := s.Get(ctx, org, id)
	if err != nil {
		return nil, err
	}
	rows, _ := s.db.Query(ctx, dropListByJob, org, job.ID, MaxDropsListed)
	drops, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Drop])
	if err != nil {
		return nil, fmt.Errorf("providerjobs: list drops: %w", err)
	}
	return drops, nil
}
