package api

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/servicekeys"
)

// ServiceKeys verifies and manages service keys; a *servicekeys.Service
// is one.
type ServiceKeys interface {
	// Verify returns the live key of a token, servicekeys.ErrInvalidKey
	// for a token that is none.
	Verify(ctx context.Context, raw string) (servicekeys.Caller, error)
	Create(ctx context.Context, org uuid.UUID, p servicekeys.CreateParams) (token string, k *servicekeys.Key, err error)
	List(ctx context.Context, org uuid.UUID) ([]servicekeys.Key, error)
	Revoke(ctx context.Context, org, id uuid.UUID, actor string) (*servicekeys.Key, error)
}

// serviceKeyRequest is the body of a key's creation.
type serviceKeyRequest struct {
	Name      string              `json:"name"`
	Scopes    []servicekeys.Scope `json:"scopes"`
	ExpiresAt *string             `json:"expires_at"`
}

// createdServiceKey is the answer to a creation: the key, and its token,
// which is never shown again.
type createdServiceKey struct {
	servicekeys.Key
	Token string `json:"token"`
}

// createServiceKey answers 201 with a new key and its token, shown only
// this once; a repeat creates another key.
func (s *Server) createServiceKey(c echo.Context) error {
	req, err := decodeBody[serviceKeyRequest](c, bodyMandatory)
	if err != nil {
		return err
	}
	pr := principal(c)
	p := servicekeys.CreateParams{Name: req.Name, Scopes: req.Scopes, Actor: pr.Actor}
	if req.ExpiresAt != nil {
		at, err := time.Parse(time.RFC3339Nano, *req.ExpiresAt)
		if err != nil {
			return validationFailed(FieldError{Field: "expires_at",
				Message: "must be an RFC 3339 time with its offset, such as 2027-12-01T09:00:00Z"})
		}
		p.ExpiresAt = &at
	}
	token, k, err := s.d.ServiceKeys.Create(c.Request().Context(), pr.OrganizationID, p)
	if err != nil {
		return refusedInput(err)
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.JSON(http.StatusCreated, createdServiceKey{Key: *k, Token: token})
}

// listServiceKeys lists the organization's keys, revoked ones too, newest
// first (at most servicekeys.MaxList); never a token.
func (s *Server) listServiceKeys(c echo.Context) error {
	keys, err := s.d.ServiceKeys.List(c.Request().Context(), principal(c).OrganizationID)
	return answerPage(c, keys, "", err)
}

// revokeServiceKey revokes a key, idempotently, and answers it, 200.
func (s *Server) revokeServiceKey(c echo.Context, id uuid.UUID) error {
	pr := principal(c)
	k, err := s.d.ServiceKeys.Revoke(c.Request().Context(), pr.OrganizationID, id, pr.Actor)
	return answerOr(c, k, err, answerOK)
}
