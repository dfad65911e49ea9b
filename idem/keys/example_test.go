package keys_test

import (
	"fmt"

	"github.com/wary-go/wary/idem/keys"
)

// A key names one logical operation, is sent to a third party, and so
// carries no personal data: printable ASCII, no spaces, at most
// keys.MaxLen bytes. (Caller's flow, which needs a store, runs in the
// examples of idem/sqlite.)
func ExampleValidate() {
	for _, key := range []string{"payment:order-42:attempt-1", "payment for order 42", ""} {
		fmt.Println(keys.Validate(key))
	}
	// Output:
	// <nil>
	// idem: invalid idempotency key "payment for order 42": character ' ' at byte 7 is not printable ASCII
	// idem: invalid idempotency key "": length 0, want 1 to 255 bytes
}
