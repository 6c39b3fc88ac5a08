package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/searchd/searchd/providerjobs"
)

func TestProblemForMapsProviderJobOutcomes(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("layer: %w", err) }
	for _, tt := range []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"job not found", wrap(providerjobs.ErrNotFound), http.StatusNotFound, CodeNotFound},
		{"run not found", providerjobs.ErrRunNotFound, http.StatusNotFound, CodeNotFound},
		{"registered already", wrap(providerjobs.ErrAlreadyRegistered), http.StatusConflict, CodeAlreadyRegistered},
		{"domain refuses input", providerjobs.ValidateProvider("Nope"), http.StatusBadRequest, CodeValidationFailed},
	} {
		p := problemFor(tt.err)
		if p == nil || p.status != tt.status || p.code != tt.code || titles[p.code] == "" {
			t.Errorf("%s: problemFor(%v) = %+v, want %d %s with a title", tt.name, tt.err, p, tt.status, tt.code)
		}
	}
	for _, code := range []string{CodeMissingDeliveryID, CodeInvalidDeliveryID} {
		if titles[code] == "" {
			t.Errorf("code %s has no title", code)
		}
	}
}
