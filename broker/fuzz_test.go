package broker

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// FuzzPublishValidation: Publish either hands the driver exactly the
// message it was given, or refuses it before sending with an error that is
// ErrInvalid or ErrTooLarge and ErrNotSent, and it refuses exactly the
// messages the documented rules refuse.
func FuzzPublishValidation(f *testing.F) {
	f.Add("id-1", "key", "h", "v", []byte("body"), true)
	f.Add("a\x00b", "", "wary-key", "spoof", []byte{0xff}, false)
	f.Add("", "\xff", "WARY-x", "\xfe", []byte(nil), true)
	f.Add("ok", "k", "wary-aggregate-id", "order-1", []byte("b"), true)
	f.Fuzz(func(t *testing.T, id, key, hname, hval string, body []byte, keyRequired bool) {
		caps := capability.Topic{KeyRequired: keyRequired, MaxMessageSize: 4096}
		st := &stubTopic{caps: caps}
		top := NewTopic(st, nil)
		defer top.Close()
		m := &Message{ID: id, Key: key, Headers: Headers{{hname, hval}}, Body: body}
		err := top.Publish(context.Background(), m)

		size := len(id) + len(key) + len(hname) + len(hval) + len(body)
		if id == "" {
			size += 32 // the random ID Publish gives it
		}
		valid := (id == "" || driver.ValidateID(id) == nil) && utf8.ValidString(key) && (key != "" || !keyRequired) &&
			hname != "" && utf8.ValidString(hname) && utf8.ValidString(hval) && !driver.ReservedHeader(hname) && size <= 4096
		if err != nil {
			if valid {
				t.Fatalf("refused a valid message: %v", err)
			}
			if !errors.Is(err, ErrNotSent) || !(errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooLarge)) {
				t.Fatalf("refusal %v is not ErrNotSent with ErrInvalid or ErrTooLarge", err)
			}
			if len(st.batches) != 0 {
				t.Fatal("a refused message reached the driver")
			}
			return
		}
		if !valid {
			t.Fatalf("accepted an invalid message %q %q %q=%q", id, key, hname, hval)
		}
		got := st.batches[0][0]
		if (id != "" && got.ID != id) || got.Key != key || got.Headers.Get(hname) != hval || !bytes.Equal(got.Body, body) {
			t.Fatalf("the driver got %+v", got)
		}
	})
}
