package testkit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/sqlite"
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

// Kit is one consumer under test: a database, a broker and an inbox. Build
// it with New, then Run events through a handler.
type Kit struct {
	tb       testing.TB
	opts     Options
	store    *sqlite.Store
	clock    *memory.FakeClock
	broker   *memory.Broker
	topic    *broker.Topic
	sub      *broker.Subscription // the memory broker's
	faulty   *broker.Subscription // sub, with faults on the way
	inbox    *idem.Inbox[*sql.Tx]
	seq      uint64 // runs so far, for the shuffle's stream
	ids      []string
	messages map[string]*trace // by message ID, across runs
	cur      *ref              // the delivery in flight
	rep      *Report           // the run in progress
}

// trace is what the kit saw of one message ID.
type trace struct {
	aggregate   string
	succeeded   int // handler returned nil
	rolledBack  int // of those, rolled back by the injected crash
	crashBefore bool
	crashAfter  bool
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
	// busyTimeout is the database's: the kit runs one transaction at a
	// time, so a wait for the write lock is a write outside the handler's
	// transaction.
	busyTimeout = 50 * time.Millisecond
)

// start is the fake clock's first reading.
var start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

var busyPragma = regexp.MustCompile(`busy_timeout\(\d+\)`)

// New returns a Kit for t, with a fresh database, broker and inbox; they
// are closed when t ends. It fails t (FailNow) if any of them cannot be
// set up.
func New(t testing.TB, opts *Options) *Kit {
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
	k := &Kit{tb: t, opts: o, messages: map[string]*trace{}}
	ctx := t.Context()

	dsn := sqlite.DSN(filepath.Join(t.TempDir(), "testkit.db"))
	if !busyPragma.MatchString(dsn) {
		t.Fatalf("testkit: sqlite.DSN sets no busy_timeout to shorten: %s", dsn)
	}
	dsn = busyPragma.ReplaceAllString(dsn, fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatalf("testkit: open the database: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if k.store, err = sqlite.New(ctx, db, nil); err != nil {
		t.Fatalf("testkit: migrate the database: %v", err)
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
	k.faulty = broker.NewSubscription(&faultySub{k: k}, &quiet)
	t.Cleanup(func() { k.faulty.Close() })

	k.inbox, err = idem.NewInbox(k.store, o.Consumer, k.faulty.Capabilities(), &idem.Options{
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

// DB returns the database, for the test's own tables and queries. Write to
// it before and after Run, never from a handler: a handler writes through
// the transaction it is given.
func (k *Kit) DB() *sql.DB { return k.store.DB() }

// Store returns the SQLite store the inbox runs on: handlers call its
// CheckVersion and Transition, and it is what idem/keys and idem/outbox
// take.
func (k *Kit) Store() *sqlite.Store { return k.store }

// Inbox returns the consumer's inbox (with the version checks of
// Options.Versions): list the park with Parked, replay it with Replay or
// ReplayAll, read Stats.
func (k *Kit) Inbox() *idem.Inbox[*sql.Tx] { return k.inbox }

// Clock returns the broker's and the inbox's fake clock. Run moves it;
// a test may read it, or move it between runs.
func (k *Kit) Clock() *memory.FakeClock { return k.clock }

// ctx is the context of the kit's calls: the test's.
func (k *Kit) ctx() context.Context { return k.tb.Context() }
