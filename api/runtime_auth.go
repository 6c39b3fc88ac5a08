package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/servicekeys"
)

// Who opens which route. Every /v1 route names its access when it is
// registered (server.go), through one of the middlewares below, each of
// which authenticates first:
//
//   - [Server.open] of a scope: an organization's user token (any role but
//     runtime), and a service key that carries the scope.
//   - [Server.openRuntime]: the runtime's route, PUT /v1/runs/{id}/status:
//     a runtime credential (an HS256 token with the role claim "runtime",
//     `searchd token --runtime`) or a service key with runs:report. An
//     organization's user token is refused there: a user cannot forge a
//     Run's outcome.
//   - [Server.openKeyAdmin]: the management of service keys: an
//     organization's admin or an operator naming the organization. No
//     service key opens it, whatever its scopes: a leaked key cannot mint
//     itself successors or revoke the keys that would replace it.
//
// A runtime credential opens the status route alone. A key of one
// organization opens that organization's records alone: its principal
// names its organization, as a token's does, and every store reads by it.

// insufficientScopeChallenge is the WWW-Authenticate of a 403
// insufficient_scope (RFC 6750 §3).
const insufficientScopeChallenge = `Bearer realm="searchd", error="insufficient_scope"`

var (
	errRuntimeCredential = &apiError{status: http.StatusForbidden, code: CodeInsufficientScope,
		detail:    "this is a runtime credential: it reports the status of Runs (PUT /v1/runs/{id}/status) and opens no other route",
		challenge: insufficientScopeChallenge}
	errUserCredential = &apiError{status: http.StatusForbidden, code: CodeInsufficientScope,
		detail: "status reports need a runtime credential (a service key with the scope runs:report, or a token with the role " +
			"claim \"runtime\" from searchd token --runtime); an organization's user token cannot report a Run's status",
		challenge: insufficientScopeChallenge}
	errKeyManagement = &apiError{status: http.StatusForbidden, code: CodeInsufficientScope,
		detail: "an organization's service keys and webhook endpoints are managed by its admin (role \"admin\") " +
			"or an operator; a service key never manages them, whatever its scopes",
		challenge: insufficientScopeChallenge}
)

// errScope is the 403 of a service key without the scope a route needs.
func errScope(scope servicekeys.Scope) error {
	return &apiError{status: http.StatusForbidden, code: CodeInsufficientScope,
		detail:    "this service key does not carry the scope " + string(scope) + ", which this route needs",
		challenge: insufficientScopeChallenge}
}

// open admits an organization's user token (a runtime credential is
// refused) and a service key that carries scope.
func (s *Server) open(scope servicekeys.Scope) echo.MiddlewareFunc {
	return s.allow(func(c echo.Context) error {
		if k, ok := serviceKey(c); ok {
			if !k.Has(scope) {
				return errScope(scope)
			}
			return nil
		}
		if principal(c).IsRuntime() {
			return errRuntimeCredential
		}
		return nil
	})
}

// openRuntime admits a runtime credential and a service key with
// runs:report, and refuses every other caller.
func (s *Server) openRuntime() echo.MiddlewareFunc {
	return s.allow(func(c echo.Context) error {
		if k, ok := serviceKey(c); ok {
			if !k.Has(servicekeys.ScopeRunsReport) {
				return errScope(servicekeys.ScopeRunsReport)
			}
			return nil
		}
		if !principal(c).IsRuntime() {
			return errUserCredential
		}
		return nil
	})
}

// openAdmin admits an organization's admin and an operator (who, on a
// /v1 route, names an organization), and refuses every other caller: the
// routes of the organization's service keys and webhook endpoints.
func (s *Server) openAdmin() echo.MiddlewareFunc {
	return s.allow(func(c echo.Context) error {
		if _, ok := serviceKey(c); ok {
			return errKeyManagement
		}
		if p := principal(c); !p.IsAdmin() && !p.IsOperator() {
			if p.IsRuntime() {
				return errRuntimeCredential
			}
			return errKeyManagement
		}
		return nil
	})
}

// allow is authenticate, then check, which returns the refusal of the
// authenticated caller or nil.
func (s *Server) allow(check func(c echo.Context) error) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return s.authenticate(func(c echo.Context) error {
			if err := check(c); err != nil {
				return err
			}
			return next(c)
		})
	}
}
