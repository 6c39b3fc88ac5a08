package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/heldanswer"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/sessions"
)

// cookieName is the session cookie, holding a session secret (never a
// token): HttpOnly, SameSite=Strict, Path /console/, Secure over TLS.
const cookieName = "searchd_console"

// flowCookie holds an auth.Flow until the provider's callback:
// SameSite=Lax since the callback is a cross-site navigation, Path
// /console/oidc/.
const flowCookie = "searchd_console_flow"

// flowTTL bounds a sign-in at the provider.
const flowTTL = 10 * time.Minute

// maxTokenFormLen bounds the sign-in form's token field.
const maxTokenFormLen = 8 << 10

type principalKey struct{}

// session is a signed-in request's principal, secret and CSRF token.
type session struct {
	auth.Principal
	CSRF   string
	secret string
}

func sessionOf(ctx context.Context) *session {
	s, _ := ctx.Value(principalKey{}).(*session)
	return s
}

// gate says who may see a view.
type gate int

const (
	anyone       gate = iota // any signed-in principal
	auditor                  // a session that names an organization
	operatorOnly             // a session with the operator role
	keyAdmin                 // a session that names an organization, of its admin or an operator
	// streamer is auditor for an event stream, which seats its first
	// read itself (stream.go).
	streamer
)

// lookup returns the cookie's live session, nil without one, or an error
// when the database could not say.
func (c *Console) lookup(r *http.Request) (*session, error) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil, nil
	}
	s, err := c.d.Sessions.Lookup(r.Context(), ck.Value)
	switch {
	case errors.Is(err, sessions.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &session{
		Principal: auth.Principal{OrganizationID: s.OrganizationID, Actor: s.Actor, Role: auth.Role(s.Role), ExpiresAt: s.ExpiresAt},
		CSRF:      csrfToken(ck.Value),
		secret:    ck.Value,
	}, nil
}

// session admits a request whose live session passes g, and a POST only
// with its CSRF token. A GET without a session is sent to sign in; a
// refused gate answers 403.
func (c *Console) session(g gate, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.lookup(r)
		switch {
		case err != nil:
			c.unavailable(w, r, err)
			return
		case s == nil && r.Method == http.MethodGet:
			http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
			return
		case s == nil:
			c.fail(w, r, http.StatusUnauthorized, "Signed out", "Your session has ended. Sign in again.")
			return
		case (g == auditor || g == streamer) && s.OrganizationID == uuid.Nil:
			c.fail(w, r, http.StatusForbidden, "No organization",
				"You signed in without an organization, so you read no organization's records. Sign in as a member of one.")
			return
		case g == keyAdmin && (s.OrganizationID == uuid.Nil || !s.IsAdmin() && !s.IsOperator()):
			c.fail(w, r, http.StatusForbidden, "Admins only",
				"Service keys and webhook endpoints are managed by an organization's admin (the admin role) or an operator naming the organization.")
			return
		case g == operatorOnly && !s.IsOperator():
			c.fail(w, r, http.StatusForbidden, "Operators only",
				"This view is for operators of the platform: it needs the operator role, which an organization's member never has.")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(s.CSRF)) {
				c.fail(w, r, http.StatusForbidden, "Form expired",
					"This form did not carry this session's check, so it was not carried out. Reload the page and try again.")
				return
			}
		}
		// Take a seat in the seat queue shared with the API before any
		// database read, charged to the operator or organization.
		ctx := context.WithValue(r.Context(), principalKey{}, s)
		if g != anyone && g != streamer {
			flow := seatq.Flow{Kind: seatq.KindOrganization, Name: s.OrganizationID.String()}
			if g == operatorOnly {
				flow = seatq.Flow{Kind: seatq.KindOperator, Name: s.Actor}
			}
			width := pageSeats
			if r.Method == http.MethodPost {
				width = 1
			}
			seat, err := c.d.Seats.Acquire(ctx, flow, width)
			if err != nil {
				c.seatRefused(w, r, err)
				return
			}
			ctx = seatq.NewContext(ctx, seat)
			// Render under the seat, release it, then write, so a slow
			// reader holds no seat.
			client := w
			held := heldanswer.New(client)
			w = held
			defer func() {
				// Charge the cost beyond its seats to the next pages.
				seat.Charge(seatq.BytesWidth(int64(held.Bytes())))
				seat.Release()
				_ = held.Send(client)
			}()
		}
		if s.IsOperator() && r.Method == http.MethodGet {
			c.overview.warm(ctx)
		}
		r = r.WithContext(ctx)
		// A path id that is not a UUID names nothing, as in the API.
		if v := r.PathValue("id"); v != "" && uuid.Validate(v) != nil {
			c.notFound(w, r)
			return
		}
		next(w, r)
	}
}

// pageSeats is the seats a page takes up front, about an API list of a
// hundred rows; a POST takes one. The actual cost is charged after.
const pageSeats = 2

// seatRefused answers an unseated request: 429 with Retry-After, or
// 503 when the client left.
func (c *Console) seatRefused(w http.ResponseWriter, r *http.Request, err error) {
	var refusal *seatq.Refusal
	if !errors.As(err, &refusal) {
		c.fail(w, r, http.StatusServiceUnavailable, "Unavailable", "The request was cancelled before it was served.")
		return
	}
	secs := idempotency.RetryAfterSeconds(refusal.RetryAfter)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	c.fail(w, r, http.StatusTooManyRequests, "Busy",
		"Every seat of the server is taken and this page could not be served in time. Try again in "+plural(secs, "second", "seconds")+".")
}

// unavailable answers a request whose session could not be read.
func (c *Console) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	if !errs.Is(err, errs.Unavailable) {
		c.internal(w, r, err)
		return
	}
	c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: session unavailable", slog.String("error", err.Error()))
	w.Header().Set("Retry-After", "1")
	c.fail(w, r, http.StatusServiceUnavailable, "Unavailable", "The database could not be reached. Try again in a moment.")
}

// csrfToken is an HMAC keyed by the session's secret, so every replica
// computes it and no other site can.
func csrfToken(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("searchd console csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// setCookie sets cookieName or flowCookie; maxAge -1 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	ck := &http.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge, HttpOnly: true,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"), SameSite: http.SameSiteStrictMode}
	if name == flowCookie {
		ck.Path, ck.SameSite = oidcPath, http.SameSiteLaxMode
	}
	http.SetCookie(w, ck)
}

// home sends a signed-in person (past the session gate) to their first
// view.
func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, landing(sessionOf(r.Context()).Principal), http.StatusSeeOther)
}

// landing is a principal's first view: its saved searches, or the claims
// page for an operator naming no organization.
func landing(p auth.Principal) string {
	if p.OrganizationID == uuid.Nil {
		return "/console/operator/claims"
	}
	return "/console/saved-searches"
}

type signInPage struct {
	Error           string
	Provider, Token bool
}

// renderSignIn renders the sign-in page; its form-action also admits the
// provider's authorization endpoint, which browsers check on redirect.
func (c *Console) renderSignIn(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if c.d.SignIn != nil {
		w.Header().Set("Content-Security-Policy",
			strings.Replace(contentSecurityPolicy, "form-action 'self'", "form-action 'self' "+c.d.SignIn.AuthorizationOrigin(), 1))
	}
	c.render(w, r, status, "sign-in", "Sign in", signInPage{Error: msg, Provider: c.d.SignIn != nil, Token: c.d.TokenSignIn})
}

// signIn exchanges a pasted token (in the POST body) for a session that
// ends at the token's exp or the session lifetime, whichever is first.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !c.d.TokenSignIn {
		c.fail(w, r, http.StatusForbidden, "Token sign-in is off",
			"Signing in by pasting a token is for development. Sign in with your company's identity provider.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenFormLen+1024)
	token := strings.TrimSpace(r.PostFormValue("token"))
	token = strings.TrimSpace(strings.TrimPrefix(token, "Bearer "))
	p, err := c.d.Verifier.Verify(r.Context(), token)
	if err != nil {
		c.renderSignIn(w, r, http.StatusUnauthorized,
			"That token was not accepted: it must be a searchd token signed by this server, or the identity provider's, and not expired.")
		return
	}
	if c.newSession(w, r, p, sessions.ViaToken, p.ExpiresAt) {
		http.Redirect(w, r, landing(p), http.StatusSeeOther)
	}
}

// newSession stores a session for p and sets its cookie. It reports
// false when it answered the request itself (a runtime, or a database
// failure).
func (c *Console) newSession(w http.ResponseWriter, r *http.Request, p auth.Principal, via string, notAfter time.Time) bool {
	if p.IsRuntime() {
		// A runtime reports the status of Runs and reads nothing.
		c.renderSignIn(w, r, http.StatusForbidden,
			"That token is a runtime credential: it reports the status of Runs to the API and opens no console.")
		return false
	}
	secret, s, err := c.d.Sessions.Create(r.Context(), sessions.CreateParams{OrganizationID: p.OrganizationID,
		Actor: p.Actor, Role: string(p.Role), Via: via, Lifetime: c.sessionLifetime, NotAfter: notAfter})
	switch {
	case errs.Is(err, errs.Invalid):
		c.renderSignIn(w, r, http.StatusForbidden, "You were not signed in: "+strings.TrimPrefix(err.Error(), "sessions: invalid input: "))
		return false
	case err != nil:
		c.unavailable(w, r, err)
		return false
	}
	// Both judged by the database clock.
	setCookie(w, r, cookieName, secret, max(1, int(s.ExpiresAt.Sub(s.CreatedAt).Seconds())))
	c.log.LogAttrs(r.Context(), slog.LevelInfo, "console: signed in", slog.String("via", via),
		slog.String("actor", s.Actor), slog.String("role", s.Role), slog.String("session", s.ID.String()))
	return true
}

// startProviderSignIn redirects to the provider with a fresh flow cookie.
func (c *Console) startProviderSignIn(w http.ResponseWriter, r *http.Request) {
	f, to := c.d.SignIn.Start()
	setCookie(w, r, flowCookie, f.String(), int(flowTTL.Seconds()))
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// oidcPath is where the provider's callback lands.
const oidcPath = "/console/oidc/"

// providerCallback finishes a provider sign-in and answers a page that
// continues from the console's origin: a redirect from this cross-site
// navigation would not carry the new SameSite=Strict cookie.
func (c *Console) providerCallback(w http.ResponseWriter, r *http.Request) {
	// A flow answers one callback.
	setCookie(w, r, flowCookie, "", -1)
	var f auth.Flow
	ck, err := r.Cookie(flowCookie)
	if err == nil {
		f, err = auth.ParseFlow(ck.Value)
	}
	var p auth.Principal
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
		p, err = c.d.SignIn.Finish(ctx, f, r.URL.Query())
		cancel()
	}
	var refused *auth.ProviderError
	switch {
	case err == nil:
	case errors.Is(err, auth.ErrSignInState) || errors.Is(err, http.ErrNoCookie):
		c.renderSignIn(w, r, http.StatusBadRequest, "That sign-in did not start in this browser, or took longer than ten minutes. Sign in again.")
		return
	case errors.As(err, &refused):
		c.renderSignIn(w, r, http.StatusUnauthorized, "The identity provider did not sign you in ("+refused.Code+"). Sign in again.")
		return
	case errors.Is(err, auth.ErrInvalidToken):
		c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: the provider's ID token was refused")
		c.renderSignIn(w, r, http.StatusForbidden, "Your account was not accepted: it must carry an organization, or the operator role.")
		return
	default:
		c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: sign-in at the provider failed", slog.String("error", err.Error()))
		c.fail(w, r, http.StatusBadGateway, "Sign-in failed", "The identity provider could not complete the sign-in. Try again in a moment.")
		return
	}
	if !c.newSession(w, r, p, sessions.ViaOIDC, time.Time{}) {
		return
	}
	to := landing(p)
	w.Header().Set("Refresh", "0; url="+to)
	c.render(w, r, http.StatusOK, "signed-in", "Signed in", struct{ Next, Actor string }{to, p.Actor})
}

// signOut deletes the session, voiding the cookie on every replica.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	if err := c.d.Sessions.Delete(r.Context(), s.secret); err != nil {
		c.unavailable(w, r, err)
		return
	}
	setCookie(w, r, cookieName, "", -1)
	http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
}
