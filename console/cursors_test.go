package console_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/runs"
)

// forgedCursor writes a cursor as a client that knows the format but not
// the key would: version v, the instant and id, and for version 2 a MAC
// of zeros (version 1 had none).
func forgedCursor(v byte, at time.Time, id uuid.UUID) string {
	b := binary.BigEndian.AppendUint64([]byte{v}, uint64(at.UnixMicro()))
	b = append(b, id[:]...)
	if v == 2 {
		b = append(b, make([]byte, 16)...)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestCursorsAreBoundToTheirListAndOrganization: the cursor of the second
// page of organization A's Runs pages on for A, and is refused (400, no
// error logged) by the same list read by organization B, by A's saved
// searches, by a list of the timeline of A's saved search and by the
// operator's release log.
func TestCursorsAreBoundToTheirListAndOrganization(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world
	ctx := context.Background()
	store := runs.NewStore(b.pool, runs.Config{})
	for i := range 51 { // one page more than the console's 50
		name := "cap"
		if _, _, err := store.Admit(ctx, runs.AdmitParams{OrganizationID: w.OrgA, Kind: runs.KindCapability,
			StartKey: runs.DirectStartKey(fmt.Sprintf("bound-%03d", i)), RequestHash: "h", Name: &name, Actor: "bound"}); err != nil {
			t.Fatal(err)
		}
	}
	tokA, tokB, op := b.signIn(t, w.OrgA, "alice"), b.signIn(t, w.OrgB, "mallory"), b.operatorSignIn(t)
	body := b.do("GET", "/console/runs?actor=bound", tokA, nil, nil).Body.String()
	m := regexp.MustCompile(`href="/console/runs\?[^"]*cursor=([A-Za-z0-9_-]+)[^"]*" class="next"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("the first page of A's Runs has no next page")
	}
	cursor := m[1]
	if rec := b.do("GET", "/console/runs?"+url.Values{"actor": {"bound"}, "cursor": {cursor}}.Encode(), tokA, nil, nil); rec.Code != http.StatusOK ||
		!strings.Contains(rec.Body.String(), "/console/runs/") {
		t.Fatalf("A's second page with A's cursor = %d, want 200 with a Run", rec.Code)
	}
	for _, c := range []struct{ name, target, cookie string }{
		{"B's Runs", "/console/runs", tokB},
		{"A's saved searches", "/console/saved-searches", tokA},
		{"the timeline of A's saved search", "/console/saved-searches/" + w.Search.String(), tokA},
		{"the operator's releases", "/console/operator/releases", op},
	} {
		b.log.Reset()
		target := c.target + "?" + url.Values{"cursor": {cursor}}.Encode()
		if rec := b.do("GET", target, c.cookie, nil, nil); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: GET %s = %d, want 400", c.name, target, rec.Code)
		}
		if strings.Contains(b.log.String(), `"level":"ERROR"`) {
			t.Errorf("%s: GET %s logged an error: %s", c.name, target, b.log.String())
		}
	}
}
