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
	// Verify returns the principal of raw, or an error when raw is not
	// a token the server accepts.
	Verify(ctx context.Context, raw string) (auth.Principal, error)
}

const (
	principalKey  = "searchd.principal"
	serviceKeyKey = "searchd.service_key"
)

// serviceKey returns the service key the caller authenticated with, and
// false for a caller with a token.
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

// errInvalidToken is the 401 of a request that sent a bearer token the
// server refused: its challenge says so (error="invalid_token", RFC 6750
// §3.1), so a client knows to get a new token rather than add one.
var errInvalidToken = &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized,
	detail:    "the bearer token is invalid or expired: send a live service key (sdk_...), or a JWT with exp and an organization, signed with the server's HS256 secret or by its OpenID Connect provider",
	challenge: invalidTokenChallenge}

// authenticate is the middleware that admits a request only with an
// Authorization: Bearer token the server's verifier accepts (package
// auth: an HS256 token of the server's secret, or an access token of the
// configured OpenID Connect provider), or a live service key (package
// servicekeys), that names an organization: the
// /v1 routes serve one organization's records, whatever the caller's
// role. Every refusal answers the same 401: which check failed is not the
// client's business. A request with no Authorization header is told a
// token is needed; one whose credential is refused, however (a scheme
// other than Bearer, two headers, a token over auth.MaxTokenLen, one that
// does not verify), is told the token is invalid (error="invalid_token").
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

// authenticateKey admits a request whose bearer token raw is a live
// service key (servicekeys.Verifier): its principal is the key's
// organization, with the actor key:<prefix> and no role, and the key's
// scopes are kept for the route's check (runtime_auth.go). A token that
// is no live key answers 401 invalid_token, as a refused JWT does; a
// database that cannot answer, 503 (the key may be good).
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

// bearerToken returns the token of an Authorization: Bearer header. The
// scheme is case-insensitive (RFC 9110 §11.1); exactly one header is allowed.
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
