package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// The runtime credential. A runtime reports the status of the Runs
// searchd dispatched to it (PUT /v1/runs/{id}/status). Its credential is a
// token with auth.RoleRuntime (`searchd token --runtime --org UUID --sub
// NAME`): it is scoped to the one organization of its org_id, names the
// runtime in its sub (recorded with every change it reports), and opens
// the status route alone. An organization's user token is refused there,
// and a runtime credential everywhere else (the console's sign-in too): a
// runtime cannot read or start anything, and a user cannot forge a Run's
// outcome.

// insufficientScopeChallenge is the WWW-Authenticate of a 403
// insufficient_scope (RFC 6750 §3).
const insufficientScopeChallenge = `Bearer realm="searchd", error="insufficient_scope"`

var (
	errRuntimeCredential = &apiError{status: http.StatusForbidden, code: CodeInsufficientScope,
		detail:    "this is a runtime credential: it reports the status of Runs (PUT /v1/runs/{id}/status) and opens no other route",
		challenge: insufficientScopeChallenge}
	errUserCredential = &apiError{status: http.StatusForbidden, code: CodeInsufficientScope,
		detail:    "status reports need a runtime credential (a token with the role claim \"runtime\", from searchd token --runtime); an organization's user token cannot report a Run's status",
		challenge: insufficientScopeChallenge}
)

// authenticateAs is authenticate admitting the principals whose
// IsRuntime is runtime, refusing any other with refused: the user routes
// refuse a runtime credential, and the runtime's admit one alone.
func (s *Server) authenticateAs(runtime bool, refused error) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return s.authenticate(func(c echo.Context) error {
			if principal(c).IsRuntime() != runtime {
				return refused
			}
			return next(c)
		})
	}
}
