package idempotency

import "github.com/google/uuid"

// WaitersOf returns how many callers wait on h for the end of the key's
// claim: the tests wait until a waiter is asleep before they end it.
func WaitersOf(h *Hub, organizationID uuid.UUID, scope, key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiters[notifyPayload(organizationID, scope, key)])
}
