package console

import (
	"fmt"
	"time"

	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/providerjobs"
)

// The claims chart: server-side SVG, stacked bars per hour. Colours come
// from classes in console.css (the CSP admits no inline style).

type chart struct {
	// Class is the SVG's class: the wide chart and the narrow one are
	// both on the page, and console.css shows the one that fits.
	Class         string
	Width, Height int
	Panels        []chartPanel
	XLabels       []chartText
	// Claims, Drops and Releases are the totals over the window.
	Claims, Drops, Releases int64
	Hours                   int
}

type chartPanel struct {
	Title  string
	Grid   []chartLine
	Bars   []chartRect
	Legend []chartSeries
	TitleY int
}

type chartRect struct {
	X, Y, W, H   float64
	Class, Title string
}

type chartLine struct {
	Y     float64
	Label string
}

type chartText struct {
	X    float64
	Text string
}

const (
	// chartWidth is the wide chart's; chartNarrowWidth the narrow one's,
	// which a phone shows at about its own size, so its text stays
	// legible.
	chartWidth       = 760
	chartNarrowWidth = 380
	chartLeft        = 44
	chartRight       = 10
	claimsTop        = 28
	claimsH          = 150
	dropsTop         = claimsTop + claimsH + 44
	dropsH           = 70
	chartHeight      = dropsTop + dropsH + 26
)

// chartSeries is a series of a panel: what it counts, its class and label
// (its legend's too).
type chartSeries struct{ What, Class, Label string }

// series of each panel, bottom to top.
var (
	claimSeries = []chartSeries{
		{"completed", "s-completed", "completed"},
		{"in_flight", "s-inflight", "in flight"},
		{"stuck", "s-stuck", "stuck"},
	}
	// dropSeries has a series for every providerjobs.DropReason.
	dropSeries = []chartSeries{
		{string(providerjobs.DropDuplicate), "s-duplicate", "duplicate"},
		{string(providerjobs.DropHashMismatch), "s-mismatch", "hash mismatch"},
		{string(providerjobs.DropUnknownJob), "s-unknown", "unknown job"},
		{string(providerjobs.DropJobMismatch), "s-jobmismatch", "job mismatch"},
		{string(providerjobs.DropPathMismatch), "s-pathmismatch", "path mismatch"},
		{"released", "s-released", "force-released"},
	}
)

// charts is the claims chart twice: wide, and narrow for a phone.
type charts struct{ Wide, Narrow chart }

// buildChart lays out the buckets of the last hours hours ending with the
// hour of now, width units wide.
func buildChart(buckets []operator.Bucket, now time.Time, hours, width int) chart {
	first := now.UTC().Truncate(time.Hour).Add(-time.Duration(hours-1) * time.Hour)
	claims := make([]map[string]int64, hours)
	drops := make([]map[string]int64, hours)
	for i := range claims {
		claims[i], drops[i] = map[string]int64{}, map[string]int64{}
	}
	ch := chart{Class: "chart wide", Width: width, Height: chartHeight, Hours: hours}
	labelEvery := 3
	claimsTitle, dropsTitle := "Claims by the hour they were claimed, by state now", "Dropped deliveries and force-releases"
	if width < chartWidth {
		ch.Class, labelEvery = "chart narrow", 6
		claimsTitle, dropsTitle = "Claims by hour claimed, state now", "Drops and force-releases"
	}
	for _, b := range buckets {
		i := int(b.Hour.UTC().Sub(first) / time.Hour)
		if i < 0 || i >= hours {
			continue
		}
		switch b.Kind {
		case "claim":
			claims[i][b.What] += b.Count
			ch.Claims += b.Count
		case "drop":
			drops[i][b.What] += b.Count
			ch.Drops += b.Count
		case "release":
			drops[i]["released"] += b.Count
			ch.Releases += b.Count
		}
	}
	slot := float64(width-chartLeft-chartRight) / float64(hours)
	ch.Panels = []chartPanel{
		layoutPanel(claimsTitle, claimsTop, claimsH, claims, claimSeries, first, slot),
		layoutPanel(dropsTitle, dropsTop, dropsH, drops, dropSeries, first, slot),
	}
	for i := 0; i < hours-labelEvery+1; i += labelEvery {
		ch.XLabels = append(ch.XLabels, chartText{
			X:    float64(chartLeft) + float64(i)*slot + slot/2,
			Text: first.Add(time.Duration(i) * time.Hour).Format("15:04"),
		})
	}
	ch.XLabels = append(ch.XLabels, chartText{X: float64(chartLeft) + float64(hours-1)*slot + slot/2, Text: "now"})
	return ch
}

// layoutPanel lays out a panel: data's series stacked in an hour's slot
// each, from the hour first.
func layoutPanel(title string, top, height int, data []map[string]int64, series []chartSeries, first time.Time, slot float64) chartPanel {
	p := chartPanel{Title: title, TitleY: top - 10, Legend: series}
	var peak int64
	for _, m := range data {
		var sum int64
		for _, s := range series {
			sum += m[s.What]
		}
		peak = max(peak, sum)
	}
	// Three grid lines, evenly apart: 0, step and twice the step,
	// whole numbers, the top at least the peak.
	step := niceCeil((peak + 1) / 2)
	scale := 2 * step
	for i := range int64(3) {
		y := float64(top+height) - float64(i)/2*float64(height)
		p.Grid = append(p.Grid, chartLine{Y: y, Label: fmt.Sprint(i * step)})
	}
	for i, m := range data {
		x := float64(chartLeft) + float64(i)*slot + slot*0.15
		base := float64(top + height)
		for _, s := range series {
			n := m[s.What]
			if n == 0 {
				continue
			}
			h := float64(n) / float64(scale) * float64(height)
			base -= h
			hour := first.Add(time.Duration(i) * time.Hour)
			p.Bars = append(p.Bars, chartRect{X: x, Y: base, W: slot * 0.7, H: h, Class: s.Class,
				Title: fmt.Sprintf("%s–%s UTC, %s: %d", hour.Format("15:04"), hour.Add(time.Hour).Format("15:04"), s.Label, n)})
		}
	}
	return p
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(n int64) int64 {
	if n <= 1 {
		return 1
	}
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
	}
}
