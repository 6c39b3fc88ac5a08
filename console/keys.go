package console

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/servicekeys"
)

// ServiceKeys is what the console needs of service keys; a
// *servicekeys.Store has it.
type ServiceKeys interface {
	List(ctx context.Context, org uuid.UUID) ([]servicekeys.Key, error)
	Create(ctx context.Context, org uuid.UUID, p servicekeys.CreateParams) (token string, k *servicekeys.Key, err error)
	Revoke(ctx context.Context, org, id uuid.UUID, actor string) (*servicekeys.Key, error)
}

// keysPage is the service keys page: the organization's keys, and after
// a create the new key's token, shown this once.
type keysPage struct {
	Keys                    []servicekeys.Key
	Scopes                  []servicekeys.Scope
	Created                 *servicekeys.Key
	Token, Refused, Revoked string
}

// serviceKeys lists the organization's keys, revoked ones too.
func (c *Console) serviceKeys(r *http.Request, _ *filters) (view, error) {
	p, err := c.readKeys(r, keysPage{Revoked: outcome(r, "key-revoked", "revoked")})
	return view{"service-keys", "Service keys", p}, err
}

// readKeys fills p with the organization's keys.
func (c *Console) readKeys(r *http.Request, p keysPage) (keysPage, error) {
	var err error
	p.Keys, err = c.d.ServiceKeys.List(r.Context(), sessionOf(r.Context()).OrganizationID)
	p.Scopes = servicekeys.Scopes()
	return p, err
}

// createServiceKey creates a key of the session's organization from the
// form (name, scope checkboxes, days until it expires: none, never) and
// renders the page with its token, the one time it is shown; the answer
// is not stored by the browser (Cache-Control: no-store).
func (c *Console) createServiceKey(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	p := servicekeys.CreateParams{Name: r.PostFormValue("name"), Actor: s.Actor}
	for _, sc := range r.PostForm["scope"] {
		p.Scopes = append(p.Scopes, servicekeys.Scope(sc))
	}
	var page keysPage
	if d := r.PostFormValue("expires_days"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 || n > 3650 {
			page.Refused = "expires in: a whole number of days from 1 to 3650, or empty for never"
		}
		at := c.now().Add(time.Duration(n) * 24 * time.Hour)
		p.ExpiresAt = &at
	}
	var err error
	if page.Refused == "" {
		page.Token, page.Created, err = c.d.ServiceKeys.Create(r.Context(), s.OrganizationID, p)
		if page.Refused = refusal(err); page.Refused != "" {
			err = nil
		}
	}
	if err == nil {
		page, err = c.readKeys(r, page)
	}
	if err != nil {
		c.internal(w, r, err)
		return
	}
	status := http.StatusBadRequest
	if page.Refused == "" {
		status = http.StatusCreated
		c.log.InfoContext(r.Context(), "service key created in the console", "organization_id", s.OrganizationID.String(),
			"prefix", page.Created.Prefix, "actor", s.Actor)
	}
	c.render(w, r, status, "service-keys", "Service keys", page)
}

// revokeServiceKey revokes a key of the session's organization, recording
// the session's actor; revoking a revoked key changes nothing.
func (c *Console) revokeServiceKey(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	id := pathID(r)
	k, err := c.d.ServiceKeys.Revoke(r.Context(), s.OrganizationID, id, s.Actor)
	if err == nil {
		c.log.WarnContext(r.Context(), "service key revoked in the console", "organization_id", s.OrganizationID.String(),
			"prefix", k.Prefix, "actor", s.Actor)
	}
	c.redirectChange(w, r, err, servicekeys.ErrNotFound, "/console/service-keys", "revoked", "revoked")
}
