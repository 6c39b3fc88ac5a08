package api

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/savedsearch"
)

// TestHasRulesFindsEveryValidateTag: decodeBody skips the validator for a
// type with no validate tag anywhere, so hasRules must find a tag however
// deep it sits, and must end on a type that holds itself.
func TestHasRulesFindsEveryValidateTag(t *testing.T) {
	type deep struct {
		Name string `validate:"required"`
	}
	type viaSlice struct{ Items *[]map[string]deep }
	type viaMapKey struct{ M map[deep]int }
	type self struct {
		Next *self
		Kids []self
	}
	type dashed struct {
		A string `validate:"-"`
		B string `validate:""`
	}
	for _, tt := range []struct {
		v    any
		want bool
	}{
		{&startRequest{}, false},
		{&directStartRequest{}, false},
		{&savedsearch.CreateParams{}, true}, // its rules are in Brief and Baseline
		{&registerProviderJobRequest{}, true},
		{&viaSlice{}, true},
		{&viaMapKey{}, true},
		{&self{}, false},
		{&dashed{}, false},
	} {
		if got := hasRules(reflect.TypeOf(tt.v)); got != tt.want {
			t.Errorf("hasRules(%T) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

// TestAPageAnswersItsItemsAsAnArray: a page with no items answers
// "items": [] (never null), and the last page's next_cursor is null.
func TestAPageAnswersItsItemsAsAnArray(t *testing.T) {
	t.Parallel()
	for _, next := range []string{"", "c2"} {
		rec := httptest.NewRecorder()
		c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/", nil), rec)
		if err := answerPage[int](c, nil, next, nil); err != nil {
			t.Fatal(err)
		}
		want := `{"items":[],"next_cursor":null}`
		if next != "" {
			want = `{"items":[],"next_cursor":"c2"}`
		}
		if got := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusOK || got != want {
			t.Errorf("answerPage(nil, %q) = %d %s, want 200 %s", next, rec.Code, got, want)
		}
	}
}
