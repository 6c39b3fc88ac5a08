package providerjobs

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
)

// Drop is one dropped delivery of a job, as the audit in agent.webhook_drops
// keeps it for [DropRetention].
type Drop struct {
	ID uuid.UUID `json:"id"`
	// DeliveryID is the delivery's webhook-id.
	DeliveryID string `json:"delivery_id"`
	// Reason is why it was not applied: duplicate, hash_mismatch,
	// job_mismatch (posted to this job's path, its body naming another
	// provider job id) or path_mismatch
	// (unknown_job names no job, so no job lists it).
	Reason DropReason `json:"reason"`
	// RequestHash is the hex SHA-256 of the delivery's raw body, the hash
	// its claim compares, so a hash_mismatch can be told from the delivery
	// that holds the key.
	RequestHash string    `json:"request_hash"`
	ReceivedAt  time.Time `json:"received_at"`
}

// MaxDropsListed bounds the drops [Service.ListDrops] returns: the newest.
const MaxDropsListed = 500

// ListDrops returns the newest dropped deliveries (at most
// [MaxDropsListed]) of job id of org, newest first: the audit of what the
// provider sent that searchd did not apply, readable without SQL. It
// returns [ErrNotFound] when org has no such job, and an empty slice when
// nothing was dropped.
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
