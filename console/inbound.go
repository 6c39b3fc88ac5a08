package console

import (
	"net/http"
	"time"

	"github.com/searchd/searchd/providerjobs"
)

// The "Inbound" panel: provider callbacks land in agent.provider_inbox
// before they are acknowledged, and are applied once, by the handler right
// away or by the applier after it. What is still pending, and how old the
// oldest pending arrival is (the applier's lag), say whether stage two
// keeps up.

// inboxLagWarning is the lag past which the panel warns: the applier polls
// every second by default, so a minute means it is not keeping up.
const inboxLagWarning = time.Minute

type inboundPage struct {
	Pending              int64
	Lag                  time.Duration
	LagWarning           bool
	Backlog              []providerjobs.InboxEntry
	Arrivals             []providerjobs.InboxEntry
	Provider, Status     string
	PendCursor, PendNext string
	Cursor, Next         string
	Statuses             []string
}

var inboxStatuses = []string{"pending", "applied", "dropped"}

func (c *Console) inbound(r *http.Request, f *filters) (view, error) {
	p := inboundPage{Provider: f.text("provider", maxFilterLen), Status: f.oneOf("status", inboxStatuses...),
		PendCursor: f.cursor("pending"), Cursor: f.cursor("cursor"), Statuses: inboxStatuses}
	if err := f.err(); err != nil {
		return view{}, err
	}
	ctx := r.Context()
	var err error
	if p.Pending, p.Lag, err = c.d.JobAudit.InboxStats(ctx); err != nil {
		return view{}, err
	}
	p.LagWarning = p.Lag > inboxLagWarning
	p.Backlog, p.PendNext, err = c.d.JobAudit.InboxPending(ctx, providerjobs.InboxListParams{Provider: p.Provider, Limit: pageSize, Cursor: p.PendCursor})
	if err != nil {
		return view{}, err
	}
	p.Arrivals, p.Next, err = c.d.JobAudit.InboxArrivals(ctx, providerjobs.InboxListParams{Provider: p.Provider,
		Status: providerjobs.InboxStatus(p.Status), Limit: pageSize, Cursor: p.Cursor})
	return view{"inbound", "Inbound", p}, err
}
