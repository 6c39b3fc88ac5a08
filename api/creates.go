package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
)

// errNoPlane is the 500 of a keyed create on a server built without
// Deps.Plane.
var errNoPlane = errors.New("api: keyed creates need Deps.Plane")

// optionalKey reads the Idempotency-Key of a create: absent is no key (a
// create without one is not deduplicated, as before keys were honoured);
// present, it must be valid. The create itself runs once per key in its
// domain package (savedsearch.Store.CreateOnce,
// providerjobs.Service.RegisterOnce), on the idempotency plane.
func (s *Server) optionalKey(c echo.Context) (string, bool, error) {
	if len(c.Request().Header.Values(HeaderIdempotencyKey)) == 0 {
		return "", false, nil
	}
	key, err := idempotencyKey(c.Request().Header)
	return key, err == nil, err
}

// keyedStatus returns the status of a keyed create's answer: 201 when
// this request created the resource, else 200, marked Idempotent-Replayed
// when it is a repeat answered from an earlier request's effect.
func keyedStatus(c echo.Context, created, replayed bool) int {
	if replayed {
		c.Response().Header().Set(HeaderIdempotentReplayed, "true")
	}
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}
