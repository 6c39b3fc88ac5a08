package snapshot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/searchd/searchd/internal/canonjson"
	"github.com/searchd/searchd/savedsearch"
)

// TestContentDocWritesCanonjsonsBytes pins the direct writer of the
// content document to canonjson's bytes, so no content hash changes:
// strings that are copied and strings that need escaping, empty and nil
// items, a cursor or none, filters nested, with numbers as written, or
// none.
func TestContentDocWritesCanonjsonsBytes(t *testing.T) {
	t.Parallel()
	texts := []string{"", "plain", `quote"`, `back\slash`, "tab\t", "nl\n", "ctl\x01", "del\x7f", "é", "🎉",
		"\u2028", "<b>&amp;</b>", strings.Repeat("y", 200)}
	var filters []map[string]any
	for _, raw := range []string{``, `{}`, `{"lang":"en","max_age_days":30}`,
		`{"b":{"z":[1,2.50,"x<y"],"a":null},"a":true,"n":12345678901234567890}`} {
		if raw == "" {
			filters = append(filters, nil)
			continue
		}
		var b savedsearch.Brief
		if err := json.Unmarshal([]byte(`{"query":"q","filters":`+raw+`}`), &b); err != nil {
			t.Fatal(err)
		}
		filters = append(filters, b.Filters)
	}
	n := 0
	for i, q := range texts {
		for _, f := range filters {
			for _, items := range [][]string{nil, {}, texts, {texts[i]}} {
				for _, cursor := range []*string{nil, &texts[(i+1)%len(texts)]} {
					brief := savedsearch.Brief{Query: q, Filters: f}
					baseline := savedsearch.Baseline{Items: items, Cursor: cursor}
					got, err := contentDoc(brief, baseline)
					if err != nil {
						t.Fatal(err)
					}
					want, err := canonicalContent(brief, baseline)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("contentDoc(%+v, %+v) =\n%s\ncanonjson writes\n%s", brief, baseline, got, want)
					}
					n++
				}
			}
		}
	}
	t.Log(fmt.Sprintf("%d documents compared", n))
}

// canonicalContent is the document of ContentHash through canonjson, the
// definition contentDoc must match.
func canonicalContent(brief savedsearch.Brief, baseline savedsearch.Baseline) ([]byte, error) {
	doc, err := canonjson.Marshal(struct {
		Baseline savedsearch.Baseline `json:"baseline"`
		Brief    savedsearch.Brief    `json:"brief"`
	}{baseline, brief})
	if err != nil {
		return nil, fmt.Errorf("snapshot: content hash: %w", err)
	}
	return doc, nil
}
