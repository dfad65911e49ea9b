package keys_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/keys"
)

// Validate's errors match idem.ErrInvalidName, as its doc says; a key of
// MaxLen printable ASCII bytes is accepted.
func TestValidate(t *testing.T) {
	for _, bad := range []string{"", " ", "a b", "ключ", "a\x00", strings.Repeat("k", keys.MaxLen+1)} {
		if err := keys.Validate(bad); !errors.Is(err, idem.ErrInvalidName) {
			t.Errorf("Validate(%q): %v, want idem.ErrInvalidName", bad, err)
		}
	}
	for _, good := range []string{"k", "payment:order-42:attempt-1", strings.Repeat("k", keys.MaxLen), "!~"} {
		if err := keys.Validate(good); err != nil {
			t.Errorf("Validate(%q): %v", good, err)
		}
	}
}
