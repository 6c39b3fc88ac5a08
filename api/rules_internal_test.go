package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

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
