package api

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// The request headers a browser page may send (a preflight names them),
// and the answer headers it may read: those a UI acts on.
var (
	corsAllowHeaders = []string{
		echo.HeaderAuthorization, echo.HeaderContentType, HeaderIdempotencyKey,
		HeaderIfMatch, HeaderPrefer,
		// A Run's event stream resumes after it (GET /v1/runs/{id}/events).
		"Last-Event-ID",
	}
	corsExposeHeaders = []string{
		echo.HeaderLocation, "Retry-After", HeaderIdempotentReplayed, HeaderETag,
		echo.HeaderXRequestID, HeaderPreferenceApplied, echo.HeaderAllow, echo.HeaderWWWAuthenticate,
	}
)

// corsMaxAge is how long a browser may cache a preflight, in seconds.
const corsMaxAge = 600

// ValidateCORSOrigins returns an error naming the first entry that is
// neither "*" nor a wildcard-free scheme://host[:port].
func ValidateCORSOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		switch {
		case err != nil, u.Scheme != "http" && u.Scheme != "https", u.Host == "",
			u.Path != "", u.RawQuery != "", u.Fragment != "", u.User != nil,
			strings.ContainsAny(o, "*?"), strings.ToLower(o) != o:
			return fmt.Errorf("api: Deps.CORSOrigins: %q is not an origin such as http://127.0.0.1:5173 "+
				"(lower-case scheme://host[:port], no path, no wildcard) or *", o)
		}
	}
	return nil
}

// cors is echo's CORS middleware on the allow-list, or a no-op for an
// empty list (echo's default allows all). It runs before authentication,
// so token-less preflights are answered and problems stay readable.
func (s *Server) cors() echo.MiddlewareFunc {
	if len(s.d.CORSOrigins) == 0 {
		return func(next echo.HandlerFunc) echo.HandlerFunc { return next }
	}
	return middleware.CORSWithConfig(middleware.CORSConfig{
		AllowOrigins: s.d.CORSOrigins,
		// AllowMethods is left empty, so a preflight is answered with the
		// methods the route has (echo's Allow).
		AllowHeaders:  corsAllowHeaders,
		ExposeHeaders: corsExposeHeaders,
		MaxAge:        corsMaxAge,
	})
}
