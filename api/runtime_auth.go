package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// The runtime credential. Everything about it is in this file but for two
// lines of authenticate (auth.go: a runtime token needs a sub, and the
// caller records that it is one) and validRole and TokenVerifier.Verify
// (role.go), which know the role.
//
// A runtime reports the status of the Runs searchd dispatched to it (PUT
// /v1/runs/{id}/status). Its credential is an HS256 JWT like an
// organization's, signed with SEARCHD_JWT_SECRET by `searchd token
// --runtime --org UUID --sub NAME`, with the role claim "runtime": it is
// scoped to the one organization of its org_id, names the runtime in its
// sub (recorded with every change it reports), and opens the status route
// alone. An organization's user token is refused there, and a runtime
// credential everywhere else (the console's sign-in too): a runtime
// cannot read or start anything, and a user cannot forge a Run's outcome.

// RoleRuntime is the role claim of a runtime credential.
const RoleRuntime = "runtime"

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

// authenticateUser is authenticate for the user routes: it refuses a
// runtime credential.
func (s *Server) authenticateUser(next echo.HandlerFunc) echo.HandlerFunc {
	return s.authenticate(func(c echo.Context) error {
		if principal(c).Runtime {
			return errRuntimeCredential
		}
		return next(c)
	})
}

// authenticateRuntime is authenticate for the runtime's routes: it admits a
// runtime credential alone.
func (s *Server) authenticateRuntime(next echo.HandlerFunc) echo.HandlerFunc {
	return s.authenticate(func(c echo.Context) error {
		if !principal(c).Runtime {
			return errUserCredential
		}
		return next(c)
	})
}

// SignRuntimeToken returns an HS256 JWT with the role claim [RoleRuntime]
// for the runtime named actor (sub; required, recorded with every status
// change it reports) of organization org, issued at now and expiring ttl
// later. It returns an error for a nil organization, an empty or
// unrecordable actor, a non-positive ttl or a secret shorter than
// [MinJWTSecretLen].
func SignRuntimeToken(secret []byte, org uuid.UUID, actor string, now time.Time, ttl time.Duration) (string, error) {
	switch {
	case org == uuid.Nil:
		return "", errors.New("api: a runtime token needs an organization")
	case actor == "" || !validActor(actor):
		return "", errors.New("api: a runtime token needs a sub of 1 to 255 bytes of UTF-8 without NUL")
	case ttl <= 0:
		return "", errors.New("api: token ttl must be positive")
	case len(secret) < MinJWTSecretLen:
		return "", errors.New("api: JWT secret shorter than 32 bytes")
	}
	claims := Claims{
		OrgID: org.String(),
		Role:  RoleRuntime,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   actor,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}
