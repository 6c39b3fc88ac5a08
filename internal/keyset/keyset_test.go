package keyset

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	want := Position{CreatedAt: time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC), ID: uuid.New()}
	got, err := Decode(Encode(want))
	if err != nil {
		t.Fatalf("Decode(Encode(%v)) error %v", want, err)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) || got.ID != want.ID {
		t.Errorf("Decode(Encode(%v)) = %v", want, *got)
	}
}

func TestDecodeEmptyIsFirstPage(t *testing.T) {
	t.Parallel()
	p, err := Decode("")
	if p != nil || err != nil {
		t.Errorf(`Decode("") = %v, %v; want nil, nil`, p, err)
	}
}

func TestDecodeRefusesForeignCursors(t *testing.T) {
	t.Parallel()
	valid := Encode(Position{CreatedAt: time.Now(), ID: uuid.New()})
	for _, c := range []string{"x", "!!!!", valid[:len(valid)-2], valid + "AA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		if p, err := Decode(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%q) = %v, %v; want ErrInvalid", c, p, err)
		}
	}
}
