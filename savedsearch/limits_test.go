package savedsearch_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/searchd/searchd/savedsearch"
)

// TestSizeLimitsAreCheckedBeforeAnySQL runs every write over a size limit
// against a store whose pool is closed: an answer of ErrInvalid with a
// *LimitError naming the field, rather than a connection error, proves the
// limit was checked before the store tried the database.
func TestSizeLimitsAreCheckedBeforeAnySQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.db.Close()
	deep := map[string]any{"leaf": 1}
	for range savedsearch.MaxFilterDepth {
		deep = map[string]any{"n": deep}
	}
	wide := map[string]any{}
	for i := range savedsearch.MaxFilterKeys + 1 {
		wide[fmt.Sprintf("k%d", i)] = i
	}
	long := strings.Repeat("c", savedsearch.MaxCursorBytes+1)
	items := make([]string, 6000)
	for i := range items {
		items[i] = strings.Repeat("é", 100) // 200 bytes each: 1.2 MB
	}
	brief := func(f map[string]any) savedsearch.Brief { return savedsearch.Brief{Query: "q", Filters: f} }
	create := func(br savedsearch.Brief, bl savedsearch.Baseline) error {
		_, err := b.store.Create(b.ctx, b.org, savedsearch.CreateParams{Name: "n", Brief: br, Baseline: bl})
		return err
	}
	tests := []struct {
		name  string
		call  func() error
		field string
		limit string
	}{
		{"deep filters", func() error { return create(brief(deep), savedsearch.Baseline{}) }, "brief.filters", "filter depth limit"},
		{"many keys", func() error { return create(brief(wide), savedsearch.Baseline{}) }, "brief.filters", "filter key limit"},
		{"big filters", func() error {
			return create(brief(map[string]any{"s": strings.Repeat("x", savedsearch.MaxFilterBytes)}), savedsearch.Baseline{})
		}, "brief.filters", "filter size limit"},
		{"long cursor", func() error { return create(brief(nil), savedsearch.Baseline{Cursor: &long}) }, "baseline.cursor", "cursor limit"},
		{"big baseline", func() error { return create(brief(nil), savedsearch.Baseline{Items: items}) }, "baseline.items", "baseline size limit"},
		{"update deep", func() error {
			br := brief(deep)
			_, err := b.store.Update(b.ctx, b.org, uuid.New(), savedsearch.UpdateParams{Brief: &br})
			return err
		}, "brief.filters", "filter depth limit"},
		{"replace long cursor", func() error {
			_, err := b.store.ReplaceBaseline(b.ctx, b.org, uuid.New(), savedsearch.Baseline{Cursor: &long})
			return err
		}, "cursor", "cursor limit"},
		{"replace big baseline", func() error {
			_, err := b.store.ReplaceBaseline(b.ctx, b.org, uuid.New(), savedsearch.Baseline{Items: items})
			return err
		}, "items", "baseline size limit"},
	}
	for _, tt := range tests {
		err := tt.call()
		var le *savedsearch.LimitError
		if !errors.Is(err, savedsearch.ErrInvalid) || !errors.As(err, &le) || len(le.Fields) != 1 || le.Fields[0].Name != tt.field ||
			!strings.Contains(le.Fields[0].Message, tt.limit) {
			t.Errorf("%s = %v, want ErrInvalid with a LimitError on %s", tt.name, err, tt.field)
		}
	}
}
