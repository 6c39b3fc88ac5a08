package snapshot

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
)

func FuzzSummaryJSONIsEncodingJSONs(f *testing.F) {
	f.Add(int64(1), "3f2a", int64(0))
	f.Add(int64(-9), "<&>\u2028", int64(1)<<40)
	f.Add(int64(1)<<62, "\xff", int64(-1)<<62)
	f.Fuzz(func(t *testing.T, version int64, hash string, nanos int64) {
		s := Summary{ID: uuid.New(), SavedSearchID: uuid.New(), SavedSearchVersion: version, ContentHash: hash,
			CreatedAt: time.Unix(0, nanos).In(time.FixedZone("z", -7*3600))}
		got, gotErr := s.AppendJSON([]byte("p"))
		want, wantErr := json.Marshal(s) // by reflection: Summary has no MarshalJSON
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("error %v, encoding/json's %v", gotErr, wantErr)
		}
		if wantErr == nil && !bytes.Equal(got, append([]byte("p"), want...)) {
			t.Fatalf("\n got %s\nwant p%s", got, want)
		}
	})
}
