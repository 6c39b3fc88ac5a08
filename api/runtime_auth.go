package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/servicekeys"
)

// Every /v1 route names its access in server.go with one of the
// middlewares below, each authenticating first: [Server.open] (keys with
// the scope, and user tokens, or for runs:report runtime credentials; a
// user cannot forge a Run's outcome) and [Server.openAdmin] (admins and operators; no service key, so a leaked
// key cannot mint successors).

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

// open admits a key with scope, or a token: a runtime credential for
// runs:report, else a user token (not a runtime's).
func (s *Server) open(scope servicekeys.Scope) echo.MiddlewareFunc {
	return s.allow(func(c echo.Context) error {
		if k, ok := serviceKey(c); ok {
			if !k.Has(scope) {
				return errScope(scope)
			}
			return nil
		}
		switch runtime := principal(c).IsRuntime(); {
		case scope == servicekeys.ScopeRunsReport && !runtime:
			return errUserCredential
		case scope != servicekeys.ScopeRunsReport && runtime:
			return errRuntimeCredential
		}
		return nil
	})
}

// openAdmin admits an organization's admin or an operator naming it.
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

// allow authenticates, then returns check's refusal, if any.
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
