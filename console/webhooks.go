package console

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/webhooks"
)

// webhookDeliveriesShown is how many of each endpoint's newest
// deliveries the page shows.
const webhookDeliveriesShown = 20

type webhookEndpointView struct {
	Endpoint   webhooks.Endpoint
	Deliveries []webhooks.Delivery
}

// webhooksPage is the Webhooks page; after a create it shows the new
// endpoint's secret, this once.
type webhooksPage struct {
	Endpoints        []webhookEndpointView
	Manage           bool
	EventTypes       []string
	Created          *webhooks.Endpoint
	Refused, Changed string
	// Form is what a refused create was sent, written back into the form.
	Form webhooks.CreateParams
}

// webhooksPage lists endpoints with their newest deliveries and attempts,
// never a secret.
func (c *Console) webhooksPage(r *http.Request, _ *filters) (view, error) {
	p, err := c.readWebhooks(r, webhooksPage{Changed: outcome(r, "webhook-changed", "changed")})
	return view{"webhooks", "Webhooks", p}, err
}

// readWebhooks fills p with the organization's endpoints (without their
// secrets) and whether the session manages them.
func (c *Console) readWebhooks(r *http.Request, p webhooksPage) (webhooksPage, error) {
	ctx, s := r.Context(), sessionOf(r.Context())
	list, err := c.d.Webhooks.List(ctx, s.OrganizationID)
	if err != nil {
		return p, err
	}
	p.Endpoints = make([]webhookEndpointView, 0, len(list))
	for _, e := range list {
		e.Secret = ""
		ds, err := c.d.Webhooks.Deliveries(ctx, s.OrganizationID, e.ID, webhookDeliveriesShown)
		if err != nil {
			return p, err
		}
		p.Endpoints = append(p.Endpoints, webhookEndpointView{Endpoint: e, Deliveries: ds})
	}
	p.Manage = s.IsAdmin() || s.IsOperator()
	p.EventTypes = webhooks.EventTypes
	return p, nil
}

// refusal is why an input was refused: the first field error, or
// webhooks.ErrTooMany; "" for any other error.
func refusal(err error) string {
	if errors.Is(err, webhooks.ErrTooMany) {
		return fmt.Sprintf("the organization has %d endpoints, the most it may have; delete one first", webhooks.MaxEndpoints)
	}
	if !errs.Is(err, errs.Invalid) {
		return ""
	}
	for _, f := range errs.FieldsOf(err) {
		return f.Name + " " + f.Message
	}
	return "the form is not one the page sent"
}

// createWebhook creates an endpoint from the form (no event types means
// all) and renders its secret once, with Cache-Control: no-store. A
// refused field is a 400 naming it.
func (c *Console) createWebhook(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	p := webhooks.CreateParams{URL: r.PostFormValue("url"), Description: r.PostFormValue("description"),
		EventTypes: r.PostForm["event_type"], Actor: s.Actor}
	e, err := c.d.Webhooks.Create(r.Context(), s.OrganizationID, p)
	page, status := webhooksPage{Created: e}, http.StatusCreated
	if why := refusal(err); why != "" {
		page.Refused, page.Form, status = "No endpoint was created: "+why, p, http.StatusBadRequest
		if errors.Is(err, webhooks.ErrTooMany) {
			status = http.StatusConflict
		}
		err = nil
	}
	if err == nil {
		page, err = c.readWebhooks(r, page)
	}
	if err != nil {
		c.internal(w, r, err)
		return
	}
	if page.Refused == "" {
		c.log.InfoContext(r.Context(), "webhook endpoint created in the console", "organization_id", s.OrganizationID.String(),
			"endpoint_id", e.ID.String(), "actor", s.Actor)
	}
	c.render(w, r, status, "webhooks", "Webhooks", page)
}

// setWebhookState enables or disables an endpoint; another state is a 400.
func (c *Console) setWebhookState(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	id := pathID(r)
	state := r.PostFormValue("state")
	_, err := c.d.Webhooks.Update(r.Context(), s.OrganizationID, id, webhooks.UpdateParams{State: &state, Actor: s.Actor})
	if err == nil {
		c.log.InfoContext(r.Context(), "webhook endpoint "+state+" in the console", "organization_id", s.OrganizationID.String(),
			"endpoint_id", id.String(), "actor", s.Actor)
	}
	c.webhookChanged(w, r, err, state, "Nothing was changed: ")
}

// deleteWebhook deletes an endpoint of the session's organization with
// its deliveries, once the form's confirm box is ticked; without it the
// page answers 400 and nothing is deleted.
func (c *Console) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	id := pathID(r)
	if r.PostFormValue("confirm") != "yes" {
		c.webhookChanged(w, r, &errs.Error{Kind: errs.Invalid, Err: webhooks.ErrInvalid,
			Fields: []errs.Field{{Name: "confirm", Message: "must be ticked to delete the endpoint"}}}, "", "Nothing was deleted: ")
		return
	}
	err := c.d.Webhooks.Delete(r.Context(), s.OrganizationID, id)
	if err == nil {
		c.log.WarnContext(r.Context(), "webhook endpoint deleted in the console", "organization_id", s.OrganizationID.String(),
			"endpoint_id", id.String(), "actor", s.Actor)
	}
	c.webhookChanged(w, r, err, "deleted", "Nothing was deleted: ")
}

// webhookChanged answers a change of an endpoint: back to the page saying
// code's outcome, or that the endpoint is gone; a refused input renders
// the page with 400 saying why, after prefix.
func (c *Console) webhookChanged(w http.ResponseWriter, r *http.Request, err error, code, prefix string) {
	if why := refusal(err); why != "" {
		page, err := c.readWebhooks(r, webhooksPage{Refused: prefix + why})
		if err != nil {
			c.internal(w, r, err)
			return
		}
		c.render(w, r, http.StatusBadRequest, "webhooks", "Webhooks", page)
		return
	}
	c.redirectChange(w, r, err, webhooks.ErrNotFound, "/console/webhooks", "changed", code)
}
