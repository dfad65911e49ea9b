package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wary-go/wary/broker/internal/text"
)

// Codec encodes values into message bodies and decodes them back (JSON
// by default).
type Codec interface {
	// ContentType names the encoding, in HeaderContentType.
	ContentType() string
	// Marshal encodes v.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into v, a pointer.
	Unmarshal(data []byte, v any) error
}

// JSON is the codec of encoding/json ("application/json"), lenient about
// unknown and missing fields as encoding/json is.
var JSON Codec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) ContentType() string                { return "application/json" }
func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// ErrUndecodable matches the error of a body the codec cannot decode (or
// of another HeaderContentType). It is marked Permanent: Run dead-letters
// the delivery (or nacks it), and package idem's inbox dead-letters or
// parks it; neither drops it.
var ErrUndecodable = errors.New("wary: undecodable message")

// NewMessage returns a message whose body is v encoded with c (nil: JSON),
// with c's content type in HeaderContentType. id and key are the message's
// ID and ordering key.
func NewMessage[T any](c Codec, id, key string, v T) (*Message, error) {
	if c == nil {
		c = JSON
	}
	body, err := c.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("wary: encode message %q as %s: %w", id, c.ContentType(), err)
	}
	return &Message{ID: id, Key: key, Headers: Headers{{HeaderContentType, c.ContentType()}}, Body: body}, nil
}

// Decode decodes d's body with c (nil: JSON) into a T. A body that does not
// decode, or another HeaderContentType, is an error matching
// ErrUndecodable, marked Permanent, with what it quotes escaped and cut;
// the codec's own error is reachable with errors.As.
func Decode[T any](c Codec, d *Delivery) (T, error) {
	var v T
	if c == nil {
		c = JSON
	}
	if ct, ok := d.Message.Headers.Lookup(HeaderContentType); ok && ct != c.ContentType() {
		return v, Permanent(fmt.Errorf("%w: message %s is %s, not %s", ErrUndecodable, text.Shown(d.Message.ID), text.Shown(ct), c.ContentType()))
	}
	if err := c.Unmarshal(d.Message.Body, &v); err != nil {
		msg := fmt.Sprintf("%v: message %s as %T (%s): %s", ErrUndecodable, text.Shown(d.Message.ID), v, c.ContentType(), text.Bound(err.Error(), maxCauseLen))
		return v, Permanent(&undecodableError{msg, err})
	}
	return v, nil
}

// maxCauseLen bounds the codec's own words in Decode's error: encoding/json
// quotes a whole literal, such as a number of a million digits.
const maxCauseLen = 512

// undecodableError is Decode's error for a body that does not decode: its
// text bounded, the codec's error still reachable with errors.As.
type undecodableError struct {
	msg string
	err error
}

func (e *undecodableError) Error() string   { return e.msg }
func (e *undecodableError) Unwrap() []error { return []error{ErrUndecodable, e.err} }

// Typed returns a Handler that decodes each delivery's body into a T with
// c (nil: JSON) and calls h with it. A body that does not decode never
// reaches h: the Handler returns Decode's error (ErrUndecodable, Permanent),
// and Run dead-letters the delivery with it as the reason.
func Typed[T any](c Codec, h func(ctx context.Context, d *Delivery, v T) error) Handler {
	return func(ctx context.Context, d *Delivery) error {
		v, err := Decode[T](c, d)
		if err != nil {
			return err
		}
		return h(ctx, d, v)
	}
}
