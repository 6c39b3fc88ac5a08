package main

import (
	"bytes"
	"fmt"
	"math"
	"slices"
)

// The chart: four panels, calls per second (linear, from 0) against
// concurrent clients (log2, 1 to 64): new starts and replays, in process
// against raw SQL and over HTTP against the thin handler. Written by hand to
// need no plotting dependency.
const (
	chartW, chartH = 960, 840
	panelW, panelH = chartW / 2, (chartH - 40) / 2
	marginL        = 70
	marginR        = 20
	marginT        = 80
	marginB        = 60
	plotW          = panelW - marginL - marginR
	plotH          = panelH - marginT - marginB
)

// line is one series of a panel: a value per client count.
type line struct {
	name, color, dash string
	points            map[int]float64
}

var (
	colorSearchd = "#1f6fb4"
	colorBase    = "#e0701a"
	colorOld     = "#6a6a6a"
)

func chart(r *report) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="24" text-anchor="middle" font-size="16" font-weight="bold">saved-search starts, durable PostgreSQL: calls per second against concurrent clients</text>`+"\n", chartW/2)

	inProcess := func(measure, system string) map[int]float64 {
		m := map[int]float64{}
		for _, x := range r.start.rows {
			if x.Measure == measure && x.System == system {
				m[x.Clients] = x.Median
			}
		}
		return m
	}
	overHTTP := func(measure string, real bool) map[int]float64 {
		m := map[int]float64{}
		for _, h := range r.http {
			if real {
				m[h.Clients] = h.Measure(measure).Real.RPS
			} else {
				m[h.Clients] = h.Measure(measure).Thin.RPS
			}
		}
		return m
	}
	panels := []struct {
		title string
		lines []line
	}{
		{"in process: new starts", []line{
			{"searchd", colorSearchd, "", inProcess("new starts", "searchd")},
			{"raw SQL, two commits", colorBase, "6 4", inProcess("new starts", "raw 2 commits")},
			{"raw SQL, three commits (before)", colorOld, "2 3", inProcess("new starts", "raw 3 commits")},
		}},
		{"in process: replays", []line{
			{"searchd", colorSearchd, "", inProcess("replays", "searchd")},
			{"raw SQL, the one statement", colorBase, "6 4", inProcess("replays", "raw")},
		}},
		{"over HTTP: new starts", []line{
			{"searchd", colorSearchd, "", overHTTP("new starts", true)},
			{"thin echo + pgx handler, same SQL", colorBase, "6 4", overHTTP("new starts", false)},
		}},
		{"over HTTP: replays", []line{
			{"searchd", colorSearchd, "", overHTTP("replays", true)},
			{"thin echo + pgx handler, same SQL", colorBase, "6 4", overHTTP("replays", false)},
		}},
	}
	for i, pn := range panels {
		panel(&b, (i%2)*panelW, 40+(i/2)*panelH, pn.title, pn.lines)
	}
	p("</svg>\n")
	return b.Bytes()
}

func panel(b *bytes.Buffer, x0, y0 int, title string, lines []line) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	left, top := float64(x0+marginL), float64(y0+marginT)
	bottom := top + plotH
	maxV := 0.0
	for _, l := range lines {
		for _, v := range l.points {
			maxV = max(maxV, v)
		}
	}
	step, yMax := niceScale(maxV)
	xOf := func(clients int) float64 { return left + math.Log2(float64(clients))/6*plotW }
	yOf := func(v float64) float64 { return bottom - v/yMax*plotH }

	p(`<text x="%.0f" y="%d" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", left+plotW/2, y0+20, title)
	for i, l := range lines {
		lx, ly := int(left)+(i%2)*190, y0+36+(i/2)*16
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5" stroke-dasharray="%s"/>`+"\n", lx, ly, lx+24, ly, l.color, l.dash)
		p(`<text x="%d" y="%d" font-size="11">%s</text>`+"\n", lx+28, ly+4, l.name)
	}
	for v := 0.0; v <= yMax+step/2; v += step {
		y := yOf(v)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+plotW, y)
		p(`<text x="%.1f" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, y+4, v)
	}
	for c := 1; c <= 64; c *= 2 {
		x := xOf(c)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x, top, x, bottom)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x, bottom, x, bottom+5)
		p(`<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x, bottom+18, c)
	}
	p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top, left, bottom)
	p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, bottom, left+plotW, bottom)
	p(`<text x="%.1f" y="%.1f" text-anchor="middle">concurrent clients (log scale)</text>`+"\n", left+plotW/2, bottom+40)
	p(`<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">calls per second</text>`+"\n",
		float64(x0)+18, top+plotH/2)
	for _, l := range lines {
		clients := make([]int, 0, len(l.points))
		for c := range l.points {
			if c >= 1 && c <= 64 {
				clients = append(clients, c)
			}
		}
		slices.Sort(clients)
		var pts bytes.Buffer
		for _, c := range clients {
			fmt.Fprintf(&pts, "%.1f,%.1f ", xOf(c), yOf(l.points[c]))
		}
		p(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5" stroke-dasharray="%s"/>`+"\n",
			pts.String(), l.color, l.dash)
		for _, c := range clients {
			p(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s, %d clients: %.0f/s</title></circle>`+"\n",
				xOf(c), yOf(l.points[c]), l.color, l.name, c, l.points[c])
		}
	}
}

// niceScale returns a tick step of 1, 2 or 5 times a power of ten giving
// about five ticks, and the axis maximum: the first tick at or above max.
func niceScale(maxV float64) (step, top float64) {
	if maxV <= 0 {
		return 1, 5
	}
	raw := maxV / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch {
	case raw <= mag:
		step = mag
	case raw <= 2*mag:
		step = 2 * mag
	case raw <= 5*mag:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	return step, math.Ceil(maxV/step) * step
}
