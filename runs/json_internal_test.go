package runs

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
)

// reflectiveJSON is the Run's JSON as encoding/json writes it by
// reflection, with the two fields MarshalJSON adds: what AppendJSON must
// write byte for byte.
func reflectiveJSON(r Run) ([]byte, error) {
	type plain Run
	return json.Marshal(struct {
		plain
		CreatedBy      *string `json:"created_by"`
		IdempotencyKey string  `json:"idempotency_key"`
	}{plain(r), r.CreatedBy, r.IdempotencyKey()})
}

func FuzzRunJSONIsEncodingJSONs(f *testing.F) {
	f.Add("saved_search", "weekly <leads> & more", "queued", `{"max_results": 50, "note": "a\u2028b"}`, "", "alice@example.com", "ss:key-1", true, "", "", "")
	f.Add("capability", "", "succeeded", "", `{"q": [1, 2.5, "x"]}`, "", "direct:capability:k", false, "s3://bucket/<result>", "", "")
	f.Add("definition", "naïve \x00 \xff", "failed", "null", "{", "\"quoted\"", "ss:\t", true, "", "quota.exceeded", "a \"quoted\" \xff message")
	f.Add("definition", "n", "cancelled", "", "", "", "direct:k", false, "", "user_cancelled", "")
	f.Fuzz(func(t *testing.T, kind, name, status, options, input, actor, startKey string, saved bool, resultRef, errCode, errMessage string) {
		at := time.Date(2026, 12, 1, 13, 0, 0, 123456789, time.UTC)
		r := Run{ID: uuid.New(), OrganizationID: uuid.New(), Kind: kind, Status: status,
			CreatedAt: at, RetainUntil: at.Add(30 * 24 * time.Hour).In(time.FixedZone("x", 3600)), StartKey: startKey}
		if saved {
			ss, snap := uuid.New(), uuid.New()
			r.SavedSearchID, r.SnapshotID = &ss, &snap
		}
		if name != "" {
			r.Name = &name
		}
		if actor != "" {
			r.CreatedBy = &actor
		}
		if options != "" {
			r.Options = json.RawMessage(options)
		}
		if input != "" {
			r.Input = json.RawMessage(input)
		}
		r.Version, r.UpdatedAt = int64(len(status)), at.Add(time.Duration(len(name))*time.Second)
		if resultRef != "" {
			r.ResultRef = &resultRef
		}
		if errCode != "" {
			r.Error = &RunError{Code: errCode}
			if errMessage != "" {
				r.Error.Message = &errMessage
			}
		}
		got, gotErr := r.AppendJSON([]byte("prefix"))
		want, wantErr := reflectiveJSON(r)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("error %v, encoding/json's %v", gotErr, wantErr)
		}
		if wantErr != nil {
			return
		}
		if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
		if m, err := json.Marshal(r); err != nil || !bytes.Equal(m, want) {
			t.Fatalf("json.Marshal of a Run: %s, %v; want %s", m, err, want)
		}
	})
}
