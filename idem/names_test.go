package idem_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/store"
)

func TestValidateConsumer(t *testing.T) {
	for _, ok := range []string{"a", "orders-v2.eu:1", "A_b", strings.Repeat("x", 63), "1st"} {
		if err := idem.ValidateConsumer(ok); err != nil {
			t.Errorf("ValidateConsumer(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", `a"b`, "a'b", "a;b", "a\x00b", "a b", "é", "a\tb", strings.Repeat("x", 64)} {
		err := idem.ValidateConsumer(bad)
		if !errors.Is(err, idem.ErrInvalidName) {
			t.Errorf("ValidateConsumer(%q): %v, want ErrInvalidName", bad, err)
		}
	}
}

func TestValidatePrefixAndTables(t *testing.T) {
	for _, ok := range []string{"", "wary_", "App_", strings.Repeat("p", 63-len("parked_aggregate_idx"))} {
		if err := store.ValidatePrefix(ok); err != nil {
			t.Errorf("ValidatePrefix(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"1x", "a-b", `a"`, "a;", "a\x00", strings.Repeat("p", 64-len("parked_aggregate_idx"))} {
		if err := store.ValidatePrefix(bad); !errors.Is(err, idem.ErrInvalidName) {
			t.Errorf("ValidatePrefix(%q): %v, want ErrInvalidName", bad, err)
		}
	}
	if parts, err := store.ValidateTableName("app.orders"); err != nil || len(parts) != 2 {
		t.Errorf("schema-qualified: %v %v", parts, err)
	}
	for _, bad := range []string{"a.b.c", ".a", "a.", `a"."b`, "a;drop"} {
		if _, err := store.ValidateTableName(bad); !errors.Is(err, idem.ErrInvalidName) {
			t.Errorf("ValidateTableName(%q): %v", bad, err)
		}
	}
	if got := store.QuoteIdentifier(`we"ird`); got != `"we""ird"` {
		t.Errorf("QuoteIdentifier: %s", got)
	}
}

func TestParseEvent(t *testing.T) {
	ev := idem.Event{AggregateID: "a-1", Version: 7, Sequence: 9, Type: "order.placed"}
	got, err := idem.ParseEvent(&broker.Message{ID: "m", Headers: ev.Headers()})
	if err != nil || got != ev {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	for _, h := range []map[string]string{
		nil,
		{idem.HeaderAggregateVersion: "1"},
		{idem.HeaderAggregateID: "a", idem.HeaderAggregateVersion: "x"},
		{idem.HeaderAggregateID: "a", idem.HeaderAggregateVersion: "-1"},
		{idem.HeaderAggregateID: "a", idem.HeaderSequence: "1.5"},
	} {
		if _, err := idem.ParseEvent(&broker.Message{ID: "m", Headers: h}); !errors.Is(err, idem.ErrNoEvent) {
			t.Errorf("ParseEvent(%v): %v, want ErrNoEvent", h, err)
		}
	}
}

func TestNewInboxRetention(t *testing.T) {
	var st store.Provider[int] = nilStore{}
	caps := capability.Subscription{RedeliveryHorizon: 7 * 24 * time.Hour}
	if _, err := idem.NewInbox(st, "c", caps, &idem.Options{Retention: time.Hour}); !errors.Is(err, idem.ErrRetention) {
		t.Errorf("short retention: %v", err)
	} else if !strings.Contains(err.Error(), "AllowShortRetention") {
		t.Errorf("error does not say how to override: %v", err)
	}
	in, err := idem.NewInbox(st, "c", caps, nil)
	if err != nil || in.Retention() != caps.RedeliveryHorizon {
		t.Errorf("default: %v", err)
	}
	if _, err := idem.NewInbox(st, "c", caps, &idem.Options{Retention: time.Hour, AllowShortRetention: true}); err != nil {
		t.Errorf("short retention with override: %v", err)
	}

	// Unknown horizon: no default, an explicit retention is required.
	unknown := capability.Subscription{RedeliveryHorizon: capability.HorizonUnknown}
	if _, err = idem.NewInbox(st, "c", unknown, nil); !errors.Is(err, idem.ErrRetention) {
		t.Errorf("unknown horizon without retention: %v, want ErrRetention", err)
	} else if !strings.Contains(err.Error(), "unknown") || !strings.Contains(err.Error(), "Options.Retention") {
		t.Errorf("error does not say the horizon is unknown and what to set: %v", err)
	}
	if in, err = idem.NewInbox(st, "c", unknown, &idem.Options{Retention: time.Minute}); err != nil || in.Retention() != time.Minute {
		t.Errorf("unknown horizon, explicit retention: %v", err)
	}

	// Unbounded horizon: default keeps for ever; a finite retention only
	// with the override.
	unbounded := capability.Subscription{RedeliveryHorizon: capability.HorizonUnbounded}
	if in, err = idem.NewInbox(st, "c", unbounded, nil); err != nil || in.Retention() != capability.HorizonUnbounded {
		t.Errorf("unbounded horizon default: %v, %v", in, err)
	}
	if _, err = idem.NewInbox(st, "c", unbounded, &idem.Options{Retention: 365 * 24 * time.Hour}); !errors.Is(err, idem.ErrRetention) {
		t.Errorf("finite retention under an unbounded horizon: %v, want ErrRetention", err)
	}
	if in, err = idem.NewInbox(st, "c", unbounded, &idem.Options{Retention: time.Hour, AllowShortRetention: true}); err != nil || in.Retention() != time.Hour {
		t.Errorf("finite retention under an unbounded horizon, with override: %v", err)
	}
	if in, err = idem.NewInbox(st, "c", unbounded, &idem.Options{Retention: capability.HorizonUnbounded}); err != nil || in.Retention() != capability.HorizonUnbounded {
		t.Errorf("unbounded retention: %v", err)
	}
	// Purge with an unbounded retention deletes nothing and does not touch
	// the store (nilStore would panic).
	in, _ = idem.NewInbox(st, "c", unbounded, nil)
	if n, err := in.Purge(t.Context()); n != 0 || err != nil {
		t.Errorf("purge, unbounded: %d, %v", n, err)
	}

	if _, err := idem.NewInbox(st, "c", caps, &idem.Options{Retention: -time.Hour}); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("negative retention: %v, want ErrInvalid", err)
	}
	if _, err := idem.NewInbox[int](nil, "c", caps, nil); err == nil {
		t.Errorf("nil store accepted")
	}
}

// nilStore satisfies Provider for constructor tests; its driver's methods
// are never called.
type nilStore struct{ intDriver }

type intDriver = store.Driver[int]

func (s nilStore) Driver() store.Driver[int] { return s }

// TestLimitsAgree: the limits idem states are the ones its stores check.
func TestLimitsAgree(t *testing.T) {
	if idem.MaxNameLen != store.MaxNameLen || keys.MaxLen != store.MaxKeyLen {
		t.Errorf("idem says names up to %d and keys up to %d bytes; the stores check %d and %d",
			idem.MaxNameLen, keys.MaxLen, store.MaxNameLen, store.MaxKeyLen)
	}
}
