package console

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/searchd/searchd/schedule"
)

// MaxPageBytes bounds every page's HTML, whatever the rows hold: lists read
// summaries, baselines are paged and JSON values are cut to maxJSONShown.
// A page over it is logged as an error.
const MaxPageBytes = 1 << 20

// maxJSONShown bounds a JSON value on a page, in bytes of indented JSON.
const maxJSONShown = 128 << 10

// page is what every template gets.
type page struct {
	Title   string
	Session *session
	// Section names the navigation entry to mark as current.
	Section string
	Nav     []navEntry
	Data    any
	Now     time.Time
	// Dispatch is the dispatch-off notice, or nil.
	Dispatch *dispatchNotice
}

type navEntry struct {
	Group, Label, Href, Section string
}

// nav returns the views s may use.
func (c *Console) nav(s *session) []navEntry {
	if s == nil {
		return nil
	}
	var out []navEntry
	for _, e := range []struct {
		shown          bool
		label, section string
	}{
		{true, "Saved searches", "saved-searches"},
		{c.d.Schedules != nil, "Schedules", "schedules"},
		{true, "Runs", "runs"},
		{true, "Provider jobs", "provider-jobs"},
		{c.d.ServiceKeys != nil && (s.IsAdmin() || s.IsOperator()), "Service keys", "service-keys"},
		{c.d.Webhooks != nil, "Webhooks", "webhooks"},
	} {
		if e.shown && s.OrganizationID != uuid.Nil {
			out = append(out, navEntry{"Audit", e.label, "/console/" + e.section, e.section})
		}
	}
	if s.IsOperator() {
		for _, p := range c.operatorPanels() {
			out = append(out, navEntry{"Operator", p.label, "/console/operator/" + p.name, "operator-" + p.name})
		}
	}
	return out
}

// parsePages parses each page template with the layout.
func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html")
	if err != nil {
		return nil, fmt.Errorf("console: layout: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := make(map[string]*template.Template)
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" || strings.HasPrefix(name, "_") {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("console: %s: %w", n, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes page name with data in the layout.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	s := sessionOf(r.Context())
	c.execute(w, r, status, name, "layout.html",
		page{Title: title, Session: s, Section: sectionOf(r.URL.Path), Nav: c.nav(s), Data: data, Now: c.now(),
			Dispatch: c.dispatchNotice(s)})
}

// execute renders template tmpl (the layout or a fragment) of page name
// into a buffer first, so a template error is a clean 500.
func (c *Console) execute(w http.ResponseWriter, r *http.Request, status int, name, tmpl string, data any) {
	t, ok := c.pages[name]
	if !ok {
		c.log.ErrorContext(r.Context(), "console: no such template", slog.String("template", name))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if tmpl != "layout.html" {
		name += "/" + tmpl
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, tmpl, data); err != nil {
		c.log.ErrorContext(r.Context(), "console: render", slog.String("template", name), slog.String("error", err.Error()))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if buf.Len() > MaxPageBytes {
		c.log.ErrorContext(r.Context(), "console: a page is over MaxPageBytes", slog.String("template", name), slog.Int("bytes", buf.Len()))
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// sectionOf names the navigation entry a path belongs to.
func sectionOf(p string) string {
	rest := strings.TrimPrefix(p, Prefix)
	switch {
	case strings.HasPrefix(rest, "operator/"):
		parts := strings.SplitN(strings.TrimPrefix(rest, "operator/"), "/", 2)
		return "operator-" + parts[0]
	case strings.HasPrefix(rest, "snapshots/"):
		return "saved-searches"
	}
	return strings.SplitN(rest, "/", 2)[0]
}

type failPage struct {
	Status  int
	Heading string
	Detail  string
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, heading, detail string) {
	c.render(w, r, status, "error", heading, failPage{Status: status, Heading: heading, Detail: detail})
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.fail(w, r, http.StatusNotFound, "Not found", "Nothing is here, or it belongs to another organization.")
}

// internal logs err and renders a 500 that says nothing internal.
func (c *Console) internal(w http.ResponseWriter, r *http.Request, err error) {
	c.log.LogAttrs(r.Context(), slog.LevelError, "console: request failed",
		slog.String("route", r.Pattern), slog.String("error", err.Error()))
	c.fail(w, r, http.StatusInternalServerError, "Something went wrong",
		"The request failed on the server; it has been logged with request id "+w.Header().Get("X-Request-Id")+".")
}

// shortID is the last 8 characters of a version 7 UUID (the first 8 are
// its timestamp), else the first 8.
func shortID(id uuid.UUID) string {
	s := id.String()
	if id.Version() == 7 {
		return s[len(s)-8:]
	}
	return s[:8]
}

var funcs = template.FuncMap{
	"has": slices.Contains[[]string],
	// plural is n and the word for it: "1 item", "0 items", "2 items".
	"plural": plural,
	// short is shortID, or the first 8 characters of a non-UUID.
	"short": func(v any) string {
		switch id := v.(type) {
		case uuid.UUID:
			return shortID(id)
		case *uuid.UUID:
			if id != nil {
				return shortID(*id)
			}
		}
		s := fmt.Sprint(v)
		if len(s) > 8 {
			return s[:8]
		}
		return s
	},
	"ts": func(t any) string {
		if p, ok := t.(*time.Time); ok && p != nil {
			t = *p
		}
		if v, ok := t.(time.Time); ok {
			return v.UTC().Format("2006-01-02 15:04:05")
		}
		return ""
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"ago": ago,
	"dur": humanDuration,
	"json": func(v any) string {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	},
	// rawjson indents a stored JSON value, cut to maxJSONShown.
	"rawjson": func(b json.RawMessage) string {
		if len(b) == 0 {
			return ""
		}
		var buf bytes.Buffer
		if json.Indent(&buf, b, "", "  ") != nil {
			buf.Reset()
			buf.Write(b)
		}
		if buf.Len() <= maxJSONShown {
			return buf.String()
		}
		// Cut before the rune at maxJSONShown, never inside one.
		i := maxJSONShown
		for i > 0 && !utf8.RuneStart(buf.Bytes()[i]) {
			i--
		}
		return fmt.Sprintf("%s\n… (cut: %d bytes in all)", buf.Bytes()[:i], len(b))
	},
	"query":  link,
	"nonnil": func(id uuid.UUID) bool { return id != uuid.Nil },
	"flag": func(b bool) string {
		if b {
			return "1"
		}
		return ""
	},
	// pager links the pages of a list at base, whose cursor is parameter
	// param, keeping the filters kv.
	"pager": newPager,
	// itemsPager links the pages of baseline items; next is 0 on the
	// last page.
	"itemsPager": func(base, param string, at, next int64, shown int, total int64, kv ...string) itemsPagerLinks {
		l := itemsPagerLinks{From: at + 1, To: at + int64(shown), Total: total, First: link(base, kv...), Paged: at > 0 || next > 0}
		if next > 0 {
			l.NextURL = link(base, slices.Concat(kv, []string{param, strconv.FormatInt(next, 10)})...)
		}
		return l
	},
	// pos writes a list position for a link, "" for the start.
	"pos": func(n int64) string {
		if n <= 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	},
	"add": func(a, b int) int { return a + b },
	// occBadge is the badge class of an occurrence's status.
	"occBadge": func(status string) string { return cmp.Or(occBadges[status], "b-pending") },
	// every writes an interval schedule's cadence for a person.
	"every": func(seconds int64) string { return humanDuration(time.Duration(seconds) * time.Second) },
	"sub":   func(a, b int) int { return a - b },
	"int":   func(n int64) int { return int(n) },
	"keyOf": idempotencyKey,
	// left writes the time from now to t: a lease's time left.
	"left": func(now, t time.Time) string { return nbsp(humanDuration(t.Sub(now))) },
	// table passes rows and now to a shared table partial.
	"table": func(rows any, now time.Time) any {
		return struct {
			Rows any
			Now  time.Time
		}{rows, now}
	},
}

var occBadges = map[string]string{schedule.StatusStarted: "b-succeeded", schedule.StatusRefused: "b-failed",
	schedule.StatusMissed: "b-archived", schedule.StatusNotReady: "b-stuck"}

// ago writes "3 min ago" with no-break spaces.
func ago(now, t time.Time) string {
	// Count years by calendar: Sub saturates at 292 years.
	switch y := t.Year() - now.Year(); {
	case y > 2:
		return nbsp(fmt.Sprintf("in %d years", y))
	case y < -2:
		return nbsp(fmt.Sprintf("%d years ago", -y))
	}
	if t.After(now) {
		return nbsp("in " + humanDuration(t.Sub(now)))
	}
	return nbsp(humanDuration(now.Sub(t)) + " ago")
}

func nbsp(s string) string { return strings.ReplaceAll(s, " ", "\u00a0") }

// humanDuration rounds d for reading: 42 s, 7 min, 3 h 5 min, 2 d 4 h.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		h := int(d.Hours())
		m := int(d.Minutes()) - 60*h
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	}
	days := int(d.Hours() / 24)
	return fmt.Sprintf("%d d %d h", days, int(d.Hours())-24*days)
}

// itemsPagerLinks are the links of baseline item pages; NextURL is "" on
// the last.
type itemsPagerLinks struct {
	From, To, Total int64
	First, NextURL  string
	Paged           bool
}

// pagerLinks are the links of a list's pages.
type pagerLinks struct {
	Cursor, Next   string
	First, NextURL string
}

func newPager(base, param, cursor, next string, kv ...string) pagerLinks {
	return pagerLinks{Cursor: cursor, Next: next, First: link(base, kv...), NextURL: link(base, slices.Concat(kv, []string{param, next})...)}
}

// link is base with the query of name/value pairs kv, skipping empty
// values; a later pair wins.
func link(base string, kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return base
	}
	return base + "?" + v.Encode()
}

// plural returns n and one or many.
func plural(n any, one, many string) string {
	v, err := strconv.ParseInt(fmt.Sprint(n), 10, 64)
	if err == nil && v == 1 {
		return "1 " + one
	}
	return fmt.Sprint(n) + " " + many
}
