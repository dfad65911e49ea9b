package testkit

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
)

// Options configures a Kit. Nil means defaults: every fault on, the Queue
// profile, seed 0.
type Options struct {
	// Consumer is the inbox's consumer name (default "test").
	Consumer string
	// Profile is the memory broker's profile (default memory.Queue, which
	// keeps no order). See the package doc for how reorders follow it.
	Profile memory.Profile
	// Seed seeds the shuffle of the reorders; the same seed gives the same
	// order.
	Seed uint64
	// NoDuplicates, NoReorder, NoCrashBeforeCommit and NoCrashAfterCommit
	// turn off one fault each (see the package doc).
	NoDuplicates        bool
	NoReorder           bool
	NoCrashBeforeCommit bool
	NoCrashAfterCommit  bool
	// Versions is the inbox's idem.Options.Versions: the state table
	// whose version column the inbox checks each event against, in its
	// transaction, before the handler runs (the zero VersionTable: no
	// version checks). Set, every handler given to Run, and to the
	// inbox's Replay and ReplayAll, runs behind the checks. New fails the
	// test for an invalid name.
	Versions idem.VersionTable
	// MaxAttempts is the inbox's idem.Options.MaxAttempts: how many
	// deliveries a gap gets before it is parked (default 10). Every retry
	// waits one step of the fake clock, during which the rest of what is
	// deliverable goes first. The broker dead-letters a message after
	// MaxAttempts+3 deliveries (room for the two crashes).
	MaxAttempts int
	// Gaps is the inbox's idem.Options.Gaps (default idem.GapsAuto: on
	// the Queue profile, which keeps no order, gaps are held in the
	// store).
	Gaps idem.GapMode
	// Logger receives the inbox's logs (default: discarded; the Report
	// says what happened).
	Logger *slog.Logger
}

// Kit is one consumer under test, on a store whose transactions are of
// type Tx: a broker and an inbox. Build it with New, then Run events
// through a handler.
type Kit[Tx any] struct {
	tb       testing.TB
	opts     Options
	query    queryFunc // the store's database, for the assertions
	clock    *memory.FakeClock
	broker   *memory.Broker
	topic    *broker.Topic
	sub      *broker.Subscription // the memory broker's
	faulty   *broker.Subscription // sub, with faults on the way
	inbox    *idem.Inbox[Tx]
	seq      uint64 // runs so far, for the shuffle's stream
	ids      []string
	messages map[string]*trace // by message ID, across runs
	cur      *ref              // the delivery in flight
	rep      *Report           // the run in progress
}

// trace is what the kit saw of one message ID.
type trace struct {
	aggregate   string
	version     int64
	succeeded   int // handler returned nil
	rolledBack  int // of those, rolled back by the injected crash
	crashBefore bool
	crashAfter  bool
	early       bool  // the inbox held it as an early event (idem.ResultEarly)
	lastErr     error // the handler's last failure
	lastAttempt int
	dead        string // dead-letter reason
}

const (
	topicName = "events"
	subName   = "consumer"
	// step is how far the fake clock moves when nothing is deliverable,
	// and every retry's delay.
	step = time.Second
)

// start is the fake clock's first reading.
var start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// New returns a Kit for t on st, a store of idem/sqlite or idem/postgres
// (on a pool or through database/sql; SQLite and Postgres make a fresh one
// for a test), with a fresh broker
// and inbox, closed when t ends. The kit reads st's database for
// AssertRows, CountRows and the early events of the Report. New fails t
// (FailNow) if the broker or the inbox cannot be set up, or if st is of
// another type.
func New[Tx any](t testing.TB, st idem.Store[Tx], opts *Options) *Kit[Tx] {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Consumer == "" {
		o.Consumer = "test"
	}
	if o.Profile == "" {
		o.Profile = memory.Queue
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	k := &Kit[Tx]{tb: t, opts: o, messages: map[string]*trace{}}
	var err error
	if k.query, err = queryOf(st); err != nil {
		t.Fatalf("testkit: %v", err)
	}

	k.clock = memory.NewFakeClock(start)
	k.broker = memory.New(&memory.Options{Clock: k.clock})
	t.Cleanup(func() { k.broker.Close() })
	cfg := &memory.TopicConfig{Profile: o.Profile, DedupWindow: -1, DeliveryLimit: o.MaxAttempts + 3}
	if err := errors.Join(k.broker.CreateTopic(topicName, cfg), k.broker.CreateSubscription(topicName, subName)); err != nil {
		t.Fatalf("testkit: create the topic: %v", err)
	}
	quiet := broker.SubscriptionOptions{Telemetry: broker.Telemetry{Logger: o.Logger}}
	if k.topic, err = k.broker.OpenTopic(topicName, &memory.TopicOptions{TopicOptions: broker.TopicOptions{Telemetry: broker.Telemetry{Logger: o.Logger}}}); err != nil {
		t.Fatalf("testkit: open the topic: %v", err)
	}
	if k.sub, err = k.broker.OpenSubscription(topicName, subName, &memory.SubscriptionOptions{SubscriptionOptions: quiet}); err != nil {
		t.Fatalf("testkit: open the subscription: %v", err)
	}
	k.faulty = broker.NewSubscription(&faultySub[Tx]{k: k}, &quiet)
	t.Cleanup(func() { k.faulty.Close() })

	k.inbox, err = idem.NewInbox(st, o.Consumer, k.faulty.Capabilities(), &idem.Options{
		Versions:    o.Versions,
		MaxAttempts: o.MaxAttempts,
		Gaps:        o.Gaps,
		Telemetry:   broker.Telemetry{Now: k.clock.Now, Logger: o.Logger},
	})
	if err != nil {
		t.Fatalf("testkit: create the inbox: %v", err)
	}
	return k
}

// Inbox returns the consumer's inbox (with the version checks of
// Options.Versions): list the park with Parked, replay it with Replay or
// ReplayAll, read Stats.
func (k *Kit[Tx]) Inbox() *idem.Inbox[Tx] { return k.inbox }

// Clock returns the broker's and the inbox's fake clock. Run moves it;
// a test may read it, or move it between runs.
func (k *Kit[Tx]) Clock() *memory.FakeClock { return k.clock }

// ctx is the context of the kit's calls: the test's.
func (k *Kit[Tx]) ctx() context.Context { return k.tb.Context() }
