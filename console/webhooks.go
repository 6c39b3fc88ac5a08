package console

import (
	"context"
	"net/http"

	"github.com/google/uuid"

	"github.com/searchd/searchd/webhooks"
)

// Webhooks reads an organization's webhook endpoints and their
// deliveries; a *webhooks.Store has it.
type Webhooks interface {
	List(ctx context.Context, org uuid.UUID) ([]webhooks.Endpoint, error)
	Deliveries(ctx context.Context, org, id uuid.UUID, limit int) ([]webhooks.Delivery, error)
}

// webhookDeliveriesShown is how many of each endpoint's newest
// deliveries the page shows.
const webhookDeliveriesShown = 20

type webhookEndpointView struct {
	Endpoint   webhooks.Endpoint
	Deliveries []webhooks.Delivery
}

// webhooksPage lists the organization's webhook endpoints, each with its
// newest deliveries and every kept attempt of each (status, answer,
// duration). It never shows a secret.
func (c *Console) webhooksPage(r *http.Request, f *filters) (view, error) {
	if err := f.err(); err != nil {
		return view{}, err
	}
	ctx, org := r.Context(), orgOf(r)
	list, err := c.d.Webhooks.List(ctx, org)
	if err != nil {
		return view{}, err
	}
	out := make([]webhookEndpointView, 0, len(list))
	for _, e := range list {
		e.Secret = ""
		ds, err := c.d.Webhooks.Deliveries(ctx, org, e.ID, webhookDeliveriesShown)
		if err != nil {
			return view{}, err
		}
		out = append(out, webhookEndpointView{Endpoint: e, Deliveries: ds})
	}
	return view{"webhooks", "Webhooks", out}, nil
}
