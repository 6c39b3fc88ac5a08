package api

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

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
		if p == nil || p.status != tt.status || p.code != tt.code || problemDocByCode[p.code].Title == "" {
			t.Errorf("%s: problemFor(%v) = %+v, want %d %s with a title", tt.name, tt.err, p, tt.status, tt.code)
		}
	}
	for _, code := range []string{CodeMissingDeliveryID, CodeInvalidDeliveryID} {
		if problemDocByCode[code].Title == "" {
			t.Errorf("code %s has no title", code)
		}
	}
}

func TestTimestampHeader(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 500_000_000, time.UTC)
	s := &Server{d: Deps{Now: func() time.Time { return now }}}
	secs := now.Unix()
	for _, tt := range []struct {
		values []string
		want   error // nil: accepted
	}{
		{[]string{strconv.FormatInt(secs, 10)}, nil},
		{[]string{" " + strconv.FormatInt(secs-300, 10) + " "}, nil},
		{[]string{strconv.FormatInt(secs+300, 10)}, nil},
		{[]string{strconv.FormatInt(secs-301, 10)}, errStaleTimestamp},
		{[]string{strconv.FormatInt(secs+301, 10)}, errStaleTimestamp},
		{[]string{"0"}, errStaleTimestamp},
		{[]string{"9223372036854775807"}, errStaleTimestamp}, // no overflow into the window
		{[]string{"9223372036854775808"}, errBadTimestamp},
		{[]string{"-9223372036854775808"}, errBadTimestamp},
		{nil, errBadTimestamp},
		{[]string{""}, errBadTimestamp},
		{[]string{strconv.FormatInt(secs, 10), strconv.FormatInt(secs, 10)}, errBadTimestamp},
		{[]string{"0" + strconv.FormatInt(secs, 10)}, errBadTimestamp},
		{[]string{"+" + strconv.FormatInt(secs, 10)}, errBadTimestamp},
		{[]string{strconv.FormatInt(secs, 10) + ".5"}, errBadTimestamp},
		{[]string{"1e9"}, errBadTimestamp},
	} {
		h := http.Header{}
		for _, v := range tt.values {
			h.Add(HeaderTimestamp, v)
		}
		got, err := s.timestampHeader(h)
		if err != tt.want || (err == nil && got != strings.TrimSpace(tt.values[0])) {
			t.Errorf("timestampHeader(%q) = %q, %v; want %v", tt.values, got, err, tt.want)
		}
	}
}

func TestSignatureHeader(t *testing.T) {
	t.Parallel()
	mac := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, tt := range []struct {
		values []string
		ok     bool
	}{
		{[]string{"v1," + mac}, true},
		{[]string{"v1a,xyz v1," + mac}, true},
		{[]string{"v1," + mac + " v1,not-base64"}, true},
		{nil, false},
		{[]string{""}, false},
		{[]string{"v1," + mac, "v1," + mac}, false},
		{[]string{mac}, false},
		{[]string{"v2," + mac}, false},
		{[]string{"v1," + strings.TrimRight(mac, "=")}, false},
		{[]string{"v1," + base64.StdEncoding.EncodeToString(make([]byte, 31))}, false},
		{[]string{"v1," + base64.StdEncoding.EncodeToString(make([]byte, 33))}, false},
		{[]string{"sha256=" + strings.Repeat("0", 64)}, false},
	} {
		h := http.Header{}
		for _, v := range tt.values {
			h.Add(HeaderSignature, v)
		}
		if _, ok := signatureHeader(h); ok != tt.ok {
			t.Errorf("signatureHeader(%q) ok = %v, want %v", tt.values, ok, tt.ok)
		}
	}
}
