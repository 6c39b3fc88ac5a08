package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/servicekeys"
)

// Verifier verifies bearer tokens; an *auth.Verifier is one.
type Verifier interface {
	Verify(ctx context.Context, raw string) (auth.Principal, error)
}

const (
	principalKey  = "searchd.principal"
	serviceKeyKey = "searchd.service_key"
)

// serviceKey returns the caller's service key, or false for a token.
func serviceKey(c echo.Context) (servicekeys.Caller, bool) {
	k, ok := c.Get(serviceKeyKey).(servicekeys.Caller)
	return k, ok
}

// principal returns the caller authenticate stored on c.
func principal(c echo.Context) auth.Principal {
	p, _ := c.Get(principalKey).(auth.Principal)
	return p
}

var errUnauthorized = &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized,
	detail: "a valid bearer token is required: a service key (sdk_...), or a JWT with exp and an organization, signed with the server's HS256 secret or by its OpenID Connect provider"}

// errInvalidToken is the 401 of a refused bearer token (RFC 6750 §3.1).
var errInvalidToken = &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized,
	detail:    "the bearer token is invalid or expired: send a live service key (sdk_...), or a JWT with exp and an organization, signed with the server's HS256 secret or by its OpenID Connect provider",
	challenge: invalidTokenChallenge}

// authenticate admits a request whose bearer token or service key
// verifies and names an organization. A missing header answers 401 asking
// for a token; any refused credential answers the same 401 invalid_token,
// never saying which check failed.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if len(c.Request().Header.Values(echo.HeaderAuthorization)) == 0 {
			return errUnauthorized
		}
		raw, ok := bearerToken(c.Request().Header)
		if !ok {
			return errInvalidToken
		}
		if strings.HasPrefix(raw, servicekeys.TokenPrefix) {
			return s.authenticateKey(c, raw, next)
		}
		p, err := s.d.Verifier.Verify(c.Request().Context(), raw)
		if err != nil || p.OrganizationID == uuid.Nil {
			return errInvalidToken
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// authenticateKey admits a live service key as its organization with
// actor key:<prefix>, keeping its scopes for the route's check. It answers
// 401 invalid_token for a dead key, 503 when the database cannot answer.
func (s *Server) authenticateKey(c echo.Context, raw string, next echo.HandlerFunc) error {
	if s.d.ServiceKeys == nil {
		return errInvalidToken
	}
	k, err := s.d.ServiceKeys.Verify(c.Request().Context(), raw)
	if errors.Is(err, servicekeys.ErrInvalidKey) {
		return errInvalidToken
	}
	if err != nil {
		return err
	}
	c.Set(principalKey, auth.Principal{OrganizationID: k.OrganizationID, Actor: k.Actor(), ExpiresAt: k.ExpiresAt})
	c.Set(serviceKeyKey, k)
	return next(c)
}

// bearerToken returns the token of exactly one Authorization: Bearer
// header; the scheme is case-insensitive.
func bearerToken(h http.Header) (string, bool) {
	values := h.Values(echo.HeaderAuthorization)
	if len(values) != 1 || len(values[0]) > auth.MaxTokenLen {
		return "", false
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}
