package main

import (
	"bytes"
	"fmt"
	"math"
)

// The chart: two panels side by side, new starts and replays, each with
// requests per second (linear, from 0) against clients (log2, 1 to 64)
// for searchd and the thin handler. Written by hand to need no plotting
// dependency.
const (
	chartW, chartH = 960, 420
	panelW         = chartW / 2
	marginL        = 70
	marginR        = 20
	marginT        = 70
	marginB        = 60
	plotW          = panelW - marginL - marginR
	plotH          = chartH - marginT - marginB
)

type series struct {
	name, color, dash string
	pick              func(httpMeasure) float64
}

var chartSeries = []series{
	{"searchd", "#1f6fb4", "", func(m httpMeasure) float64 { return m.Real.RPS }},
	{"thin handler (echo + pgx, same SQL)", "#e0701a", "6 4", func(m httpMeasure) float64 { return m.Thin.RPS }},
}

func chart(results []httpResult) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="22" text-anchor="middle" font-size="16" font-weight="bold">saved-search starts over HTTP: requests per second against concurrent clients</text>`+"\n", chartW/2)
	// Legend, centred under the title.
	lx := chartW/2 - 200
	for i, s := range chartSeries {
		x := lx + i*170
		p(`<line x1="%d" y1="42" x2="%d" y2="42" stroke="%s" stroke-width="2.5" stroke-dasharray="%s"/>`+"\n", x, x+30, s.color, s.dash)
		p(`<circle cx="%d" cy="42" r="3.5" fill="%s"/>`+"\n", x+15, s.color)
		p(`<text x="%d" y="46">%s</text>`+"\n", x+36, s.name)
	}
	for i, name := range []string{"new starts", "replays"} {
		panel(&b, i*panelW, name, results)
	}
	p("</svg>\n")
	return b.Bytes()
}

func panel(b *bytes.Buffer, x0 int, measure string, results []httpResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	left, top := float64(x0+marginL), float64(marginT)
	bottom := top + plotH
	maxRPS := 0.0
	for _, h := range results {
		for _, s := range chartSeries {
			maxRPS = max(maxRPS, s.pick(h.measure(measure)))
		}
	}
	step, yMax := niceScale(maxRPS)
	xOf := func(clients int) float64 { return left + math.Log2(float64(clients))/6*plotW }
	yOf := func(v float64) float64 { return bottom - v/yMax*plotH }

	p(`<text x="%.0f" y="%.0f" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", left+plotW/2, top-8, measure)
	// Grid and y ticks.
	for v := 0.0; v <= yMax+step/2; v += step {
		y := yOf(v)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+plotW, y)
		p(`<text x="%.1f" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, y+4, v)
	}
	// x ticks: 1, 2, 4, ... 64.
	for c := 1; c <= 64; c *= 2 {
		x := xOf(c)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x, top, x, bottom)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x, bottom, x, bottom+5)
		p(`<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x, bottom+18, c)
	}
	// Axes and their labels.
	p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top, left, bottom)
	p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, bottom, left+plotW, bottom)
	p(`<text x="%.1f" y="%.1f" text-anchor="middle">concurrent clients (log scale)</text>`+"\n", left+plotW/2, bottom+40)
	p(`<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">requests per second</text>`+"\n",
		float64(x0)+18, top+plotH/2)
	// The series.
	for _, s := range chartSeries {
		var pts bytes.Buffer
		for _, h := range results {
			if h.Clients < 1 || h.Clients > 64 {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", xOf(h.Clients), yOf(s.pick(h.measure(measure))))
		}
		p(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5" stroke-dasharray="%s"/>`+"\n",
			pts.String(), s.color, s.dash)
		for _, h := range results {
			if h.Clients < 1 || h.Clients > 64 {
				continue
			}
			v := s.pick(h.measure(measure))
			p(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s, %d clients: %.0f req/s</title></circle>`+"\n",
				xOf(h.Clients), yOf(v), s.color, s.name, h.Clients, v)
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
