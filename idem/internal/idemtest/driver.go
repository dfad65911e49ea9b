package idemtest

import (
	"context"
	"fmt"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/outbox"
)

// Driver is what the scenarios call of a store's driver directly: the
// methods idem's packages call through interfaces of their own (see their
// documentation there), here in one view for the tests.
type Driver[Tx any] interface {
	Begin(ctx context.Context) (Tx, error)
	Commit(ctx context.Context, tx Tx) error
	Rollback(ctx context.Context, tx Tx) error
	Claim(ctx context.Context, tx Tx, r seam.ClaimRequest) ([]seam.Claimed, error)
	BeginClaim(ctx context.Context, r seam.ClaimRequest) (tx Tx, began bool, claims []seam.Claimed, err error)
	Purge(ctx context.Context, consumer string, before time.Time, limit int) (int, error)
	CheckVersion(ctx context.Context, tx Tx, t idem.VersionTable, id string, version int64) (idem.VersionCheck, error)
	Transition(ctx context.Context, tx Tx, t idem.StateTable, id, to string, from ...string) (idem.TransitionCheck, error)
	RecordFailure(ctx context.Context, consumer, messageID, reason string, at time.Time) (attempts int, firstSeen time.Time, err error)
	ClearFailure(ctx context.Context, tx Tx, consumer, messageID string) error
	Park(ctx context.Context, tx Tx, p *idem.Parked) error
	ListParked(ctx context.Context, consumer string, f idem.ParkedFilter) ([]idem.Parked, error)
	CountParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error)
	DeleteParked(ctx context.Context, tx Tx, consumer string, id int64) (bool, error)
	UpdateParked(ctx context.Context, consumer string, id int64, reason string, at time.Time) error
	DiscardParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error)

	AddOutbox(ctx context.Context, tx Tx, msgs []outbox.Message, at time.Time) ([]int64, error)
	OutboxSource(ctx context.Context, c seam.SourceConfig) (seam.Source[outbox.Row], error)
	OutboxHealth(ctx context.Context, now time.Time) (outbox.Health, error)
	ListOutbox(ctx context.Context, f outbox.Filter) ([]outbox.Row, error)
	SetOutboxState(ctx context.Context, rowID int64, to outbox.State, at time.Time, from ...outbox.State) (bool, error)
	PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error)

	StageKey(ctx context.Context, tx Tx, provider, key string, intent []byte, at time.Time) (keys.Record, bool, error)
	GetKey(ctx context.Context, provider, key string) (keys.Record, bool, error)
	StartKeyCall(ctx context.Context, provider, key string, attempts int, at, leaseUntil time.Time) (bool, error)
	FinishKeyCall(ctx context.Context, provider, key string, attempts int, o keys.Outcome, at time.Time) (bool, error)
	ListKeys(ctx context.Context, f keys.Filter) ([]keys.Record, error)
	PurgeKeys(ctx context.Context, provider string, before time.Time, limit int) (int, error)

	ParkedConsumers(ctx context.Context) (map[string]int, error)
	Unclaim(ctx context.Context, tx Tx, consumer, messageID string) (bool, error)
	ListEarly(ctx context.Context, consumer string, limit int) ([]idem.EarlyAggregate, error)
}

// Early is the part of a driver that holds early events.
type Early[Tx any] interface {
	CountEarly(ctx context.Context, consumer string) (int, error)
}

// D returns p's driver, as the scenarios see it; it panics if the driver
// lacks a method of Driver.
func D[Tx any](p idem.Store[Tx]) Driver[Tx] {
	d, ok := p.Driver().Impl().(Driver[Tx])
	if !ok {
		panic(fmt.Sprintf("idemtest: the driver of %T lacks a method of idemtest.Driver", p))
	}
	return d
}
