package sqlite_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/sqlite"
)

// TestOptionsValidated: every duration and count of every options struct is
// checked at construction; a negative one (other than the documented
// "negative: never" of PurgeInterval) is refused with broker.ErrInvalid
// instead of turning into a busy loop or a timeout that expires at once.
func TestOptionsValidated(t *testing.T) {
	db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(t.TempDir(), "o.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := sqlite.New(t.Context(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := memory.New(nil)
	t.Cleanup(func() { b.Close() })
	if err := b.CreateTopic("t", nil); err != nil {
		t.Fatal(err)
	}
	topic, err := b.OpenTopic("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close() })
	caps := capability.Subscription{RedeliveryHorizon: time.Hour, DeadLetter: true}
	inbox := func(o idem.Options) error { _, err := idem.NewInbox(st, "c", caps, &o); return err }
	relay := func(o outbox.RelayOptions) error { _, err := outbox.NewRelay(st, topic, &o); return err }
	source := func(o sqlite.SourceOptions) error { _, err := st.WithSource(o); return err }
	newKeys := func(c keys.Contract, o keys.Options) error {
		c.Provider = "p"
		_, err := keys.New(st, c, &o)
		return err
	}
	neg := -time.Second
	for name, tc := range map[string]struct {
		err   error
		valid bool
	}{
		"inbox defaults":             {inbox(idem.Options{}), true},
		"inbox PurgeInterval never":  {inbox(idem.Options{PurgeInterval: neg}), true},
		"inbox Retention":            {inbox(idem.Options{Retention: neg}), false},
		"inbox MaxAttempts":          {inbox(idem.Options{MaxAttempts: -1}), false},
		"inbox PurgeBatch":           {inbox(idem.Options{PurgeBatch: -1}), false},
		"inbox CommitTimeout":        {inbox(idem.Options{CommitTimeout: neg}), false},
		"relay defaults":             {relay(outbox.RelayOptions{}), true},
		"relay PurgeInterval never":  {relay(outbox.RelayOptions{PurgeInterval: neg}), true},
		"relay PollInterval":         {relay(outbox.RelayOptions{PollInterval: neg}), false},
		"relay PublishTimeout":       {relay(outbox.RelayOptions{PublishTimeout: neg}), false},
		"source Lease":               {source(sqlite.SourceOptions{Lease: neg}), false},
		"relay Retention":            {relay(outbox.RelayOptions{KeepSent: neg}), false},
		"relay BatchSize":            {relay(outbox.RelayOptions{BatchSize: -1}), false},
		"source PerAggregate":        {source(sqlite.SourceOptions{PerAggregate: -1}), false},
		"relay Concurrency":          {relay(outbox.RelayOptions{Concurrency: -1}), false},
		"relay MaxAttempts":          {relay(outbox.RelayOptions{MaxAttempts: -1}), false},
		"relay PurgeBatch":           {relay(outbox.RelayOptions{PurgeBatch: -1}), false},
		"relay Backoff":              {relay(outbox.RelayOptions{Backoff: broker.Backoff{Initial: neg}}), false},
		"keys defaults":              {newKeys(keys.Contract{}, keys.Options{}), true},
		"keys Retention and Margin":  {newKeys(keys.Contract{Retention: time.Hour, Margin: time.Minute}, keys.Options{}), true},
		"keys Retention":             {newKeys(keys.Contract{Retention: neg}, keys.Options{}), false},
		"keys Margin":                {newKeys(keys.Contract{Retention: time.Hour, Margin: neg}, keys.Options{}), false},
		"keys Margin over Retention": {newKeys(keys.Contract{Retention: time.Hour, Margin: time.Hour}, keys.Options{}), false},
		"keys CallTimeout":           {newKeys(keys.Contract{}, keys.Options{CallTimeout: neg}), false},
	} {
		if tc.valid && tc.err != nil {
			t.Errorf("%s: %v, want accepted", name, tc.err)
		}
		if !tc.valid && !errors.Is(tc.err, broker.ErrInvalid) {
			t.Errorf("%s: %v, want an error matching broker.ErrInvalid", name, tc.err)
		}
	}
}
