package console

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/providerjobs"
)

// TestChartAxisTicksAreEvenAndCoverThePeak: the three grid lines of a
// panel are 0, a step and twice the step, whole numbers, and the top is
// at least the highest bar, for every peak.
func TestChartAxisTicksAreEvenAndCoverThePeak(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	for peak := int64(0); peak <= 2500; peak++ {
		if peak > 120 && peak%37 != 0 {
			continue
		}
		ch := buildChart([]operator.Bucket{{Kind: "claim", Hour: now.Truncate(time.Hour), What: "completed", Count: peak}}, now, chartHours, chartWidth)
		var labels []string
		for _, g := range ch.Panels[0].Grid {
			labels = append(labels, g.Label)
		}
		var step, top int64
		if _, err := fmt.Sscan(labels[1], &step); err != nil {
			t.Fatalf("peak %d: tick %q is not a whole number", peak, labels[1])
		}
		if _, err := fmt.Sscan(labels[2], &top); err != nil {
			t.Fatalf("peak %d: tick %q is not a whole number", peak, labels[2])
		}
		if labels[0] != "0" || step <= 0 || top != 2*step || top < peak {
			t.Fatalf("peak %d: ticks %v, want 0, s, 2s with 2s at least the peak", peak, labels)
		}
		if peak > 2 && top > 5*peak {
			t.Fatalf("peak %d: ticks %v leave most of the panel empty", peak, labels)
		}
	}
}

// TestChartDrawsEveryDropReason: a drop of every reason providerjobs
// records is a bar of its own and has a key in the legend.
func TestChartDrawsEveryDropReason(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	reasons := []providerjobs.DropReason{providerjobs.DropDuplicate, providerjobs.DropHashMismatch,
		providerjobs.DropUnknownJob, providerjobs.DropJobMismatch, providerjobs.DropPathMismatch}
	var buckets []operator.Bucket
	for _, r := range reasons {
		buckets = append(buckets, operator.Bucket{Kind: "drop", Hour: now.Truncate(time.Hour), What: string(r), Count: 1})
	}
	drops := buildChart(buckets, now, chartHours, chartWidth).Panels[1]
	if len(drops.Bars) != len(reasons) {
		t.Errorf("%d drops of %d reasons drew %d bars", len(reasons), len(reasons), len(drops.Bars))
	}
	var legend []string
	for _, l := range drops.Legend {
		legend = append(legend, l.Label)
	}
	for _, want := range []string{"duplicate", "hash mismatch", "unknown job", "job mismatch", "path mismatch", "force-released"} {
		if !slices.Contains(legend, want) {
			t.Errorf("the drops legend %v lacks %q", legend, want)
		}
	}
}
