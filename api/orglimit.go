package api

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// DefaultOrgMaxInFlight is the default of [Deps.OrgMaxInFlight]: a quarter
// of the default pool of cmd/searchd (16), so that three organizations at
// their cap still leave a quarter of the pool to everybody else.
const DefaultOrgMaxInFlight = 4

// rateLimitedRetryAfter is the Retry-After of a 429: one of the caller's
// own requests in flight ends long before it on any healthy database.
const rateLimitedRetryAfter = time.Second

// orgLimiter counts the requests each organization has in flight. It is a
// mutex and a map: no database round trip, no goroutine, and an entry only
// while an organization has a request in flight, so its size is bounded by
// the requests being served.
type orgLimiter struct {
	max      int
	mu       sync.Mutex
	inFlight map[uuid.UUID]int
}

func newOrgLimiter(max int) *orgLimiter {
	return &orgLimiter{max: max, inFlight: map[uuid.UUID]int{}}
}

// acquire reports whether org may start one more request, and if so
// counts it; the caller must then release it.
func (l *orgLimiter) acquire(org uuid.UUID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.inFlight[org]
	if n >= l.max {
		return false
	}
	l.inFlight[org] = n + 1
	return true
}

func (l *orgLimiter) release(org uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.inFlight[org]; n > 1 {
		l.inFlight[org] = n - 1
	} else {
		delete(l.inFlight, org)
	}
}

// limitOrganization is the middleware, after authenticate, that caps the
// requests one organization has in flight at once, body reading and every
// statement included, so that one tenant's slow lists or floods of starts
// cannot hold the whole database pool (or buffer bodies without end) while
// other tenants wait. A request over the cap is not queued: it answers 429
// rate_limited with Retry-After at once and is counted in
// searchd_http_rate_limited_total. The cap is per process; with replicas,
// an organization may have that many on each.
func (s *Server) limitOrganization(next echo.HandlerFunc) echo.HandlerFunc {
	limiter := s.orgLimiter
	return func(c echo.Context) error {
		org := principal(c).OrganizationID
		if !limiter.acquire(org) {
			s.metrics.ObserveRateLimited(s.routeLabel(c))
			return &apiError{status: http.StatusTooManyRequests, code: CodeRateLimited,
				detail: fmt.Sprintf("your organization has %d requests in flight, the most this server serves at once for one organization; "+
					"retry after the Retry-After delay", limiter.max),
				retryAfter: rateLimitedRetryAfter}
		}
		defer limiter.release(org)
		return next(c)
	}
}
