package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/searchd/searchd/auth"
)

// cookieName is the session cookie. It holds the bearer token signed in
// with: HttpOnly (no script reads it), SameSite=Strict (no other site's
// page sends it), Path /console/ (the API never sees it), Secure over TLS,
// expiring with the token. Replicas need no shared session store: each
// verifies the token as the API would.
const cookieName = "searchd_console"

// maxTokenFormLen bounds the sign-in form's token field.
const maxTokenFormLen = 8 << 10

type principalKey struct{}

// session is a signed-in request: the principal and the CSRF token its
// forms carry.
type session struct {
	auth.Principal
	CSRF string
}

func sessionOf(ctx context.Context) *session {
	s, _ := ctx.Value(principalKey{}).(*session)
	return s
}

// gate says who may see a view.
type gate int

const (
	anyone       gate = iota // any signed-in principal
	auditor                  // a token that names an organization
	operatorOnly             // a token with the operator role claim
)

// session admits a request with a valid session cookie that passes g, and
// a POST only with the session's CSRF token in its csrf field. Without a
// session a GET is sent to the sign-in form; a refused gate answers 403.
func (c *Console) session(g gate, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(cookieName)
		var p auth.Principal
		if err == nil {
			p, err = c.verifier.Verify(r.Context(), ck.Value)
		}
		if err != nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
				return
			}
			c.fail(w, r, http.StatusUnauthorized, "Signed out", "Your session has ended. Sign in again.")
			return
		}
		s := &session{Principal: p, CSRF: c.csrfToken(ck.Value)}
		switch {
		case g == auditor && p.OrganizationID.String() == zeroUUID:
			c.fail(w, r, http.StatusForbidden, "No organization",
				"This token names no organization, so it reads no organization's records. Sign in with an organization's token.")
			return
		case g == operatorOnly && !p.IsOperator():
			c.fail(w, r, http.StatusForbidden, "Operators only",
				"This view is for operators of the platform: it needs a token with the operator role, which an organization's token never has.")
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
		if p.IsOperator() && r.Method == http.MethodGet {
			// An operator at work is likely to open the claims page: have
			// its counts read in the background, so that page need not wait.
			c.overview.warm(r.Context(), c.d.Operator, c.now, c.log)
		}
		next(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, s)))
	}
}

const zeroUUID = "00000000-0000-0000-0000-000000000000"

// csrfToken is the session's CSRF token: an HMAC of the cookie's token
// under the console's CSRF key. Another site cannot read it (the cookie is
// HttpOnly, the pages same-origin), and it changes with every sign-in.
func (c *Console) csrfToken(token string) string {
	m := hmac.New(sha256.New, c.csrfKey)
	m.Write([]byte(token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// deriveKey derives a key for one purpose from the server's secret, so the
// CSRF key is not the JWT key.
func deriveKey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
		return
	}
	p, err := c.verifier.Verify(r.Context(), ck.Value)
	switch {
	case err != nil:
		http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
	case p.OrganizationID.String() != zeroUUID:
		http.Redirect(w, r, "/console/saved-searches", http.StatusSeeOther)
	default:
		http.Redirect(w, r, "/console/operator/claims", http.StatusSeeOther)
	}
}

type signInPage struct {
	Error string
}

func (c *Console) signInForm(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "sign-in", "Sign in", signInPage{})
}

// signIn exchanges the token of the form for the session cookie. The
// token travels in the POST body alone; CrossOriginProtection has refused
// a cross-site post before this runs (login CSRF).
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenFormLen+1024)
	token := strings.TrimSpace(r.PostFormValue("token"))
	token = strings.TrimSpace(strings.TrimPrefix(token, "Bearer "))
	p, err := c.verifier.Verify(r.Context(), token)
	if err != nil {
		c.render(w, r, http.StatusUnauthorized, "sign-in", "Sign in",
			signInPage{Error: "That token was not accepted: it must be a searchd token signed by this server and not expired."})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: token, Path: Prefix,
		Expires: p.ExpiresAt, MaxAge: max(1, int(p.ExpiresAt.Sub(c.now()).Seconds())),
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode,
	})
	dest := "/console/saved-searches"
	if p.OrganizationID.String() == zeroUUID {
		dest = "/console/operator/claims"
	}
	http.Redirect(w, r, dest, http.StatusSeeOther)
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
}
