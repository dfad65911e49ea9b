package outbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/internal/seam"
)

// Add writes in the caller's transaction: its rows show when the
// transaction commits, with their sequences and the outbox's clock, and
// vanish with a rollback.
func TestAddWritesInTheCallersTransaction(t *testing.T) {
	ctx := context.Background()
	s := newFakeStore(t)
	clock := newClock()
	box, err := New(s, &Options{Telemetry: broker.Telemetry{Now: clock.Now}})
	if err != nil {
		t.Fatal(err)
	}

	tx := s.begin()
	noID := &Message{AggregateID: "order-1", Version: 2, Payload: []byte("b")}
	seqs, err := box.Add(ctx, tx, msg("order-1", 1), noID, msg("order-2", 1))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1, 2, 1}; !slices.Equal(seqs, want) {
		t.Errorf("sequences %v, want %v", seqs, want)
	}
	if noID.ID == "" {
		t.Errorf("Add left the empty message ID empty")
	}
	if n := len(s.all()); n != 0 {
		t.Fatalf("%d rows visible before the commit", n)
	}
	tx.Rollback()
	if n := len(s.all()); n != 0 {
		t.Fatalf("%d rows after a rollback", n)
	}

	tx = s.begin()
	if _, err := box.Add(ctx, tx, msg("order-1", 1), noID); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	rows := s.all()
	if len(rows) != 2 {
		t.Fatalf("%d rows after the commit, want 2", len(rows))
	}
	for i, want := range []*Message{msg("order-1", 1), noID} {
		r := rows[i]
		if r.ID != want.ID || r.AggregateID != want.AggregateID || r.Version != want.Version || string(r.Payload) != string(want.Payload) ||
			r.Sequence != int64(i+1) || r.State != Pending || !r.CreatedAt.Equal(clock.Now()) {
			t.Errorf("row %d: %+v, want message %+v, sequence %d, pending, created %s", i, r, want, i+1, clock.Now())
		}
	}
	if seqs, err := box.Add(ctx, s.begin()); err != nil || seqs != nil {
		t.Errorf("Add of nothing: %v, %v; want nil, nil", seqs, err)
	}
}

// Add refuses what a relay would not publish, before it writes anything:
// one invalid message fails the call, and the valid ones before it are not
// written (nor given an ID).
func TestAddRefusesInvalidMessages(t *testing.T) {
	ctx := context.Background()
	for name, m := range map[string]*Message{
		"nil":                  nil,
		"blank ID":             {ID: " \t", AggregateID: "a"},
		"control in ID":        {ID: "a\x00b", AggregateID: "a"},
		"no aggregate":         {ID: "m"},
		"blank aggregate":      {ID: "m", AggregateID: "  "},
		"aggregate UTF-8":      {ID: "m", AggregateID: "a\xff"},
		"type UTF-8":           {ID: "m", AggregateID: "a", Type: "t\xff"},
		"negative version":     {ID: "m", AggregateID: "a", Version: -1},
		"relay's header":       {ID: "m", AggregateID: "a", Headers: broker.Headers{{broker.HeaderSequence, "7"}}},
		"relay's header, case": {ID: "m", AggregateID: "a", Headers: broker.Headers{{strings.ToUpper(broker.HeaderAggregateID), "x"}}},
		"empty header name":    {ID: "m", AggregateID: "a", Headers: broker.Headers{{"", "x"}}},
	} {
		t.Run(name, func(t *testing.T) {
			s := newFakeStore(t)
			box, err := New(s, nil)
			if err != nil {
				t.Fatal(err)
			}
			valid := &Message{AggregateID: "a"}
			tx := s.begin()
			_, err = box.Add(ctx, tx, valid, m)
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("Add: %v, want ErrInvalidMessage", err)
			}
			tx.Commit()
			if s.adds != 0 || len(s.all()) != 0 {
				t.Errorf("Add wrote %d times, %d rows; want nothing", s.adds, len(s.all()))
			}
			if valid.ID != "" {
				t.Errorf("a refused call gave the valid message the ID %q", valid.ID)
			}
		})
	}
}

// The store's failure reaches the caller, wrapped, and the caller's
// transaction keeps nothing of the call.
func TestAddStoreFailure(t *testing.T) {
	s := newFakeStore(t)
	box, err := New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	s.set(func(s *fakeStore) { s.f.add = boom })
	tx := s.begin()
	if _, err := box.Add(context.Background(), tx, msg("a", 1)); !errors.Is(err, boom) {
		t.Fatalf("Add: %v, want %v", err, boom)
	}
	tx.Commit()
	if n := len(s.all()); n != 0 {
		t.Errorf("%d rows, want none", n)
	}
}

// New and NewRelay refuse what is not a store with their part, and
// NewRelay a nil topic, with errors matching broker.ErrInvalid.
func TestConstructorsRefuseWhatIsNoStore(t *testing.T) {
	if _, err := New[*fakeTx](nil, nil); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("New(nil): %v, want ErrInvalid", err)
	}
	if _, err := New[*fakeTx](noPart{}, nil); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("New(a store without the outbox's part): %v, want ErrInvalid", err)
	}
	if _, err := New[*fakeTx](noPart{impl: struct{}{}}, nil); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("New(a store without the outbox's part): %v, want ErrInvalid", err)
	}
	g := newRig(t)
	if _, err := NewRelay[*fakeTx](noPart{impl: struct{}{}}, g.topic, nil); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("NewRelay(a store without the relay's part): %v, want ErrInvalid", err)
	}
	if _, err := NewRelay(g.s, nil, nil); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("NewRelay(nil topic): %v, want ErrInvalid", err)
	}
}

// noPart is a store whose driver implements nothing of the outbox.
type noPart struct{ impl any }

func (p noPart) Driver() seam.Driver[*fakeTx] { return seam.NewDriver[*fakeTx](p.impl) }

// NewMessage encodes the payload and records the codec's content type
// among the headers, which Add accepts and the relay publishes.
func TestNewMessage(t *testing.T) {
	m, err := NewMessage(nil, "", "order-1", 3, "order.placed", map[string]int{"total": 42})
	if err != nil {
		t.Fatal(err)
	}
	if m.AggregateID != "order-1" || m.Version != 3 || m.Type != "order.placed" || string(m.Payload) != `{"total":42}` ||
		m.Headers.Get(broker.HeaderContentType) != broker.JSON.ContentType() {
		t.Errorf("NewMessage: %+v", m)
	}
	g := newRig(t)
	g.add(m)
	if _, err := g.relay(nil).Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := g.receive(1)[0]
	if got.ID != m.ID || got.Headers.Get(broker.HeaderContentType) != broker.JSON.ContentType() {
		t.Errorf("published %+v", got)
	}
	if _, err := NewMessage(nil, "", "a", 0, "", func() {}); err == nil {
		t.Errorf("NewMessage of a func: no error")
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Pending: "pending", Sent: "sent", Quarantined: "quarantined", Discarded: "discarded", 9: "State(9)"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", int(s), s.String(), want)
		}
	}
}
