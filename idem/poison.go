package idem

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// checkID checks a message ID against driver.ValidateID (see ErrInvalidID).
func checkID(id string) error {
	if id == "" {
		return broker.Permanent(fmt.Errorf("%w (%w)", ErrNoID, broker.ErrInvalid))
	}
	if err := driver.ValidateID(id); err != nil {
		return broker.Permanent(fmt.Errorf("%w: %w", ErrInvalidID, err))
	}
	return nil
}

// shownID is a message ID as it may appear in an error or a reason: quoted
// (escaping control characters and invalid bytes) and cut to 64 bytes.
func shownID(id string) string {
	const show = 64
	if len(id) <= show {
		return strconv.Quote(id)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(id[:show]), len(id))
}

// standInID is the ID a message is parked under when its own cannot be
// claimed (see ErrInvalidID).
func standInID(id string) string {
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return "wary-no-id:" + hex.EncodeToString(b[:])
	}
	sum := sha256.Sum256([]byte(id))
	return "wary-invalid-id:" + hex.EncodeToString(sum[:])
}

// poison settles d for good after cause, a permanent failure of d itself
// that no retry can fix (its ID breaks the ID rules, the store refused one
// of its values, ErrData, or its body does not decode,
// broker.ErrUndecodable): it dead-letters d with the reason where
// the broker can, and otherwise parks it, under a stand-in ID when its own
// breaks the rules. Only if parking fails too is d nacked.
func (in *Inbox[Tx]) poison(ctx context.Context, d *broker.Delivery, cause error) (Result, error) {
	in.stats.failed.Add(1)
	herr := fmt.Errorf("idem: consumer %q, message %s, attempt %d: %w", in.consumer, shownID(d.Message.ID), d.Attempt, cause)
	if in.caps.DeadLetter {
		sctx := settleCtx(ctx)
		if err := d.DeadLetter(sctx, herr.Error()); err != nil {
			return ResultDeadLettered, errors.Join(herr, err)
		}
		return ResultDeadLettered, herr
	}
	pd := d
	if checkID(d.Message.ID) != nil {
		m := *d.Message
		m.ID = standInID(d.Message.ID)
		pd = broker.NewDetachedDelivery(&m, d.Attempt)
	}
	now := in.o.Now()
	tx, err := in.store.Begin(ctx)
	if err != nil {
		return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, errors.Join(herr, storeErr("begin", err)))
	}
	parked, err := in.parkTx(ctx, tx, pd, herr.Error(), max(d.Attempt, 1), now, now)
	if err == nil {
		err = in.commit(ctx, tx)
	} else {
		in.rollback(ctx, tx)
	}
	if err != nil {
		return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, errors.Join(herr, storeErr("park", err)))
	}
	if !parked { // a copy was parked before
		in.stats.duplicates.Add(1)
		return ResultDuplicate, in.ack(ctx, d)
	}
	in.stats.parked.Add(1)
	in.o.Logger.Warn("idem: message parked: it cannot be claimed", slog.String("consumer", in.consumer),
		slog.String("message_id", pd.Message.ID), slog.String("reason", herr.Error()))
	return ResultParked, in.ack(ctx, d)
}
