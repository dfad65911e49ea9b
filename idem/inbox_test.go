package idem

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem/internal/seam"
)

func TestNewInboxRetention(t *testing.T) {
	var st Store[int] = nilStore{}
	caps := capability.Subscription{RedeliveryHorizon: 7 * 24 * time.Hour}
	if _, err := NewInbox(st, "c", caps, &Options{Retention: time.Hour}); !errors.Is(err, ErrRetention) {
		t.Errorf("short retention: %v", err)
	} else if !strings.Contains(err.Error(), "AllowShortRetention") {
		t.Errorf("error does not say how to override: %v", err)
	}
	in, err := NewInbox(st, "c", caps, nil)
	if err != nil || in.Retention() != caps.RedeliveryHorizon {
		t.Errorf("default: %v", err)
	}
	if _, err := NewInbox(st, "c", caps, &Options{Retention: time.Hour, AllowShortRetention: true}); err != nil {
		t.Errorf("short retention with override: %v", err)
	}

	// Unknown horizon: no default, an explicit retention is required.
	unknown := capability.Subscription{RedeliveryHorizon: capability.HorizonUnknown}
	if _, err = NewInbox(st, "c", unknown, nil); !errors.Is(err, ErrRetention) {
		t.Errorf("unknown horizon without retention: %v, want ErrRetention", err)
	} else if !strings.Contains(err.Error(), "unknown") || !strings.Contains(err.Error(), "Options.Retention") {
		t.Errorf("error does not say the horizon is unknown and what to set: %v", err)
	}
	if in, err = NewInbox(st, "c", unknown, &Options{Retention: time.Minute}); err != nil || in.Retention() != time.Minute {
		t.Errorf("unknown horizon, explicit retention: %v", err)
	}

	// Unbounded horizon: default keeps for ever; a finite retention only
	// with the override.
	unbounded := capability.Subscription{RedeliveryHorizon: capability.HorizonUnbounded}
	if in, err = NewInbox(st, "c", unbounded, nil); err != nil || in.Retention() != capability.HorizonUnbounded {
		t.Errorf("unbounded horizon default: %v, %v", in, err)
	}
	if _, err = NewInbox(st, "c", unbounded, &Options{Retention: 365 * 24 * time.Hour}); !errors.Is(err, ErrRetention) {
		t.Errorf("finite retention under an unbounded horizon: %v, want ErrRetention", err)
	}
	if in, err = NewInbox(st, "c", unbounded, &Options{Retention: time.Hour, AllowShortRetention: true}); err != nil || in.Retention() != time.Hour {
		t.Errorf("finite retention under an unbounded horizon, with override: %v", err)
	}
	if in, err = NewInbox(st, "c", unbounded, &Options{Retention: capability.HorizonUnbounded}); err != nil || in.Retention() != capability.HorizonUnbounded {
		t.Errorf("unbounded retention: %v", err)
	}
	// Purge with an unbounded retention deletes nothing and does not touch
	// the store (nilStore would panic).
	in, _ = NewInbox(st, "c", unbounded, nil)
	if n, err := in.Purge(t.Context()); n != 0 || err != nil {
		t.Errorf("purge, unbounded: %d, %v", n, err)
	}

	if _, err := NewInbox(st, "c", caps, &Options{Retention: -time.Hour}); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("negative retention: %v, want ErrInvalid", err)
	}
	if _, err := NewInbox[int](nil, "c", caps, nil); err == nil {
		t.Errorf("nil store accepted")
	}
}

// nilStore satisfies Provider for constructor tests; its driver's methods
// are never called.
type nilStore struct {
	inboxStore[int]
}

func (s nilStore) Driver() seam.Driver[int] { return seam.NewDriver[int](s) }

// partlessStore is a store whose implementation lacks the inbox's part.
type partlessStore struct{ impl any }

func (s partlessStore) Driver() seam.Driver[int] { return seam.NewDriver[int](s.impl) }

// TestNewInboxStoreParts: a store without the inbox's methods, or without
// an implementation, is refused at construction with ErrInvalid, naming
// what is missing.
func TestNewInboxStoreParts(t *testing.T) {
	caps := capability.Subscription{RedeliveryHorizon: time.Hour}
	_, err := NewInbox[int](partlessStore{impl: struct{}{}}, "c", caps, nil)
	if !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), "does not implement the inbox's part") {
		t.Errorf("a store without the inbox's part: %v", err)
	}
	if _, err := NewInbox[int](partlessStore{}, "c", caps, nil); !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), "has no driver") {
		t.Errorf("a store without an implementation: %v", err)
	}
}
