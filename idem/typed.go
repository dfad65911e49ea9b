package idem

import (
	"context"

	"github.com/wary-go/wary/broker"
)

// Typed returns a Handler that decodes each delivery's body into a T with
// c (nil: broker.JSON) and calls h with it, in the inbox's transaction. A
// body that does not decode (broker.ErrUndecodable) never reaches h: the
// inbox dead-letters the message with the reason, or parks it where the
// broker cannot dead-letter; it is not retried, and it holds up nothing
// but the later messages of its own aggregate, while it is parked.
func Typed[Tx, T any](c broker.Codec, h func(ctx context.Context, tx Tx, d *broker.Delivery, v T) error) Handler[Tx] {
	return func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		v, err := broker.Decode[T](c, d)
		if err != nil {
			return err
		}
		return h(ctx, tx, d, v)
	}
}
