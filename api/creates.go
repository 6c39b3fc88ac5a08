package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
)

// errNoPlane is the 500 of a keyed create on a server built without
// Deps.Plane.
var errNoPlane = errors.New("api: keyed creates need Deps.Plane")

// optionalKey reads a create's optional Idempotency-Key; a present key
// must be valid.
func (s *Server) optionalKey(c echo.Context) (string, bool, error) {
	if len(c.Request().Header.Values(HeaderIdempotencyKey)) == 0 {
		return "", false, nil
	}
	key, err := idempotencyKey(c.Request().Header)
	return key, err == nil, err
}

// keyedStatus returns 201 when created, else 200, marking a replay
// Idempotent-Replayed.
func keyedStatus(c echo.Context, created, replayed bool) int {
	if replayed {
		c.Response().Header().Set(HeaderIdempotentReplayed, "true")
	}
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}
