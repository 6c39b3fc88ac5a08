package api

import (
	"context"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/webhooks"
)

// Webhooks is what the API needs of the webhook endpoint store; a
// *webhooks.Store has it.
type Webhooks interface {
	Create(ctx context.Context, org uuid.UUID, p webhooks.CreateParams) (*webhooks.Endpoint, error)
	Get(ctx context.Context, org, id uuid.UUID) (*webhooks.Endpoint, error)
	List(ctx context.Context, org uuid.UUID) ([]webhooks.Endpoint, error)
	Update(ctx context.Context, org, id uuid.UUID, p webhooks.UpdateParams) (*webhooks.Endpoint, error)
	Delete(ctx context.Context, org, id uuid.UUID) error
	Deliveries(ctx context.Context, org, id uuid.UUID, limit int) ([]webhooks.Delivery, error)
}

// endpointRequest is the body of an endpoint's creation and of its
// change (where every field is optional); webhooks decides every rule.
type endpointRequest struct {
	URL         *string   `json:"url"`
	Description *string   `json:"description"`
	EventTypes  *[]string `json:"event_types"`
	State       *string   `json:"state"`
}

// createWebhookEndpoint creates an enabled endpoint, 201 with its secret.
func (s *Server) createWebhookEndpoint(c echo.Context) error {
	req, err := decodeBody[endpointRequest](c, bodyMandatory)
	if err != nil {
		return err
	}
	if req.URL == nil {
		return validationFailed(FieldError{Field: "url", Message: "is required"})
	}
	if req.State != nil {
		return validationFailed(FieldError{Field: "state", Message: "is set by PATCH; a new endpoint is enabled"})
	}
	p := webhooks.CreateParams{URL: *req.URL, Actor: principal(c).Actor}
	if req.Description != nil {
		p.Description = *req.Description
	}
	if req.EventTypes != nil {
		p.EventTypes = *req.EventTypes
	}
	e, err := s.d.Webhooks.Create(c.Request().Context(), principal(c).OrganizationID, p)
	if err != nil {
		return refusedInput(err)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/webhook-endpoints/"+e.ID.String())
	return c.JSON(http.StatusCreated, e)
}

// listWebhookEndpoints answers the organization's endpoints, without
// their secrets.
func (s *Server) listWebhookEndpoints(c echo.Context) error {
	list, err := s.d.Webhooks.List(c.Request().Context(), principal(c).OrganizationID)
	return answerOr(c, list, err, answerItems)
}

// updateWebhookEndpoint changes an endpoint: its URL, description, types,
// or state (enabled, disabled).
func (s *Server) updateWebhookEndpoint(c echo.Context, id uuid.UUID) error {
	req, err := decodeBody[endpointRequest](c, bodyMandatory)
	if err != nil {
		return err
	}
	e, err := s.d.Webhooks.Update(c.Request().Context(), principal(c).OrganizationID, id, webhooks.UpdateParams{
		URL: req.URL, Description: req.Description, EventTypes: req.EventTypes, State: req.State, Actor: principal(c).Actor})
	return answerOr(c, e, refusedInput(err), answerOK)
}

// deleteWebhookEndpoint deletes an endpoint with its deliveries, 204.
func (s *Server) deleteWebhookEndpoint(c echo.Context) error {
	return readByID(func(ctx context.Context, org, id uuid.UUID) (struct{}, error) {
		return struct{}{}, s.d.Webhooks.Delete(ctx, org, id)
	}, answerNoContent)(c)
}

// listWebhookDeliveries answers an endpoint's newest deliveries, each with
// its kept attempts.
func (s *Server) listWebhookDeliveries(c echo.Context, id uuid.UUID) error {
	limit, _, err := listQuery(c, webhooks.MaxDeliveriesLimit)
	if err != nil {
		return err
	}
	list, err := s.d.Webhooks.Deliveries(c.Request().Context(), principal(c).OrganizationID, id, limit)
	return answerOr(c, list, refusedInput(err), answerItems)
}
