package broker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// TestPublishSaysWhichMessagesWereSent: a Publish of 25 messages in
// batches of 10 whose second batch fails says which were accepted (the
// first batch), which failed and how (each message's own class when the
// driver tells them apart), and which were not attempted; as a whole it
// may have been sent, never "not sent", and the partly failed batch is not
// sent again.
func TestPublishSaysWhichMessagesWereSent(t *testing.T) {
	tooBig := errors.New("message 13 is over the limit once encoded")
	transient := errors.New("connection reset")
	infos := map[error]driver.ErrorInfo{tooBig: {Code: driver.TooLarge}, transient: {Code: driver.Unavailable}}
	msgs := func() []*Message {
		out := make([]*Message, 25)
		for i := range out {
			out[i] = &Message{Key: "k"}
		}
		return out
	}
	wantNotSent := func(t *testing.T, err error, i int, class error) {
		t.Helper()
		if !errors.Is(err, ErrNotSent) || (class != nil && !errors.Is(err, class)) {
			t.Errorf("message %d: %v, want not sent and %v", i, err, class)
		}
	}

	// The driver tells the messages of the failed batch apart.
	errs := make([]error, 10)
	errs[0], errs[1] = nil, nil // 10, 11 accepted
	errs[2] = driver.ErrNotAttempted
	errs[3] = tooBig
	for i := 4; i < 10; i++ {
		errs[i] = driver.ErrNotAttempted
	}
	d := &stubTopic{caps: capability.Topic{MaxBatchSize: 10}, infos: infos,
		errs: []error{nil, &driver.BatchError{Errs: errs}}}
	err := NewTopic(d, fastRetry).Publish(context.Background(), msgs()...)
	var be *Error
	if !errors.As(err, &be) || len(be.Messages) != 25 {
		t.Fatalf("got %v, want an *Error with 25 Messages", err)
	}
	if errors.Is(err, ErrNotSent) || !errors.Is(err, ErrMaybeSent) || !errors.Is(err, ErrTooLarge) {
		t.Errorf("partly sent: %v, want ErrMaybeSent and ErrTooLarge, not ErrNotSent", err)
	}
	for i, e := range be.Messages {
		switch {
		case i < 12:
			if e != nil {
				t.Errorf("message %d was accepted, got %v", i, e)
			}
		case i == 13:
			wantNotSent(t, e, i, ErrTooLarge)
		default:
			wantNotSent(t, e, i, nil)
			if errors.Is(e, ErrTooLarge) {
				t.Errorf("message %d: %v, its own class is not its neighbour's", i, e)
			}
		}
	}
	if len(d.batches) != 2 {
		t.Errorf("%d batches sent, want 2 (a partly failed batch is not sent again)", len(d.batches))
	}

	// The driver does not tell them apart: the batch's error is each of
	// its messages' error.
	d = &stubTopic{caps: capability.Topic{MaxBatchSize: 10}, infos: infos, errs: []error{nil, transient, transient, transient}}
	err = NewTopic(d, fastRetry).Publish(context.Background(), msgs()...)
	if !errors.As(err, &be) || len(be.Messages) != 25 || errors.Is(err, ErrNotSent) || !errors.Is(err, ErrRetryable) {
		t.Fatalf("second batch failed: %v", err)
	}
	for i, e := range be.Messages {
		if (i < 10) != (e == nil) {
			t.Errorf("message %d: %v", i, e)
		}
		if i >= 10 {
			wantNotSent(t, e, i, nil)
		}
	}

	// The first batch fails: nothing was sent, and the error says so.
	d = &stubTopic{caps: capability.Topic{MaxBatchSize: 10}, infos: infos, errs: []error{tooBig}}
	err = NewTopic(d, fastRetry).Publish(context.Background(), msgs()...)
	if !errors.Is(err, ErrNotSent) || !errors.Is(err, ErrTooLarge) || !errors.As(err, &be) || len(be.Messages) != 25 {
		t.Fatalf("first batch refused: %v", err)
	}
}

// TestPublishErrorOfAnotherOp: a driver that refuses a message with an
// error built for another op (driver.Invalidf's "open") still gives a publish
// error that says "not sent", and whose text does not name the other op.
func TestPublishErrorOfAnotherOp(t *testing.T) {
	bad := driver.Invalidf("servicebus: message ID is 129 characters, over Service Bus's MessageId limit of 128")
	d := &stubTopic{errs: []error{bad}}
	err := NewTopic(d, fastRetry).Publish(context.Background(), &Message{Key: "k"})
	var be *Error
	if !errors.Is(err, ErrNotSent) || !errors.Is(err, ErrInvalid) || !errors.As(err, &be) || be.Op != "publish" {
		t.Fatalf("got %v, want a publish error, not sent, invalid", err)
	}
	if want := "wary: publish (invalid) [not sent]: " + bad.(*driver.Error).Err.Error(); err.Error() != want {
		t.Errorf("text %q, want %q", err, want)
	}

	// In a batch, the refusal is the refused message's alone.
	d = &stubTopic{errs: []error{&driver.BatchError{Errs: []error{driver.ErrNotAttempted, bad}}}}
	err = NewTopic(d, fastRetry).Publish(context.Background(), &Message{Key: "k"}, &Message{Key: "k"})
	if !errors.As(err, &be) || len(be.Messages) != 2 || !errors.Is(err, ErrNotSent) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v, want a publish error, not sent, invalid, with 2 Messages", err)
	}
	if m := be.Messages[0]; !errors.Is(m, ErrNotSent) || errors.Is(m, ErrInvalid) {
		t.Errorf("message 0: %v, want not sent, not invalid", m)
	}
	if m := be.Messages[1]; !errors.Is(m, ErrNotSent) || !errors.Is(m, ErrInvalid) {
		t.Errorf("message 1: %v, want not sent, invalid", m)
	}
	if want := "wary: publish (invalid) [0 of 2 sent, 1 failed]: message 1: " + bad.(*driver.Error).Err.Error(); err.Error() != want {
		t.Errorf("text %q, want %q", err, want)
	}
}

// TestPublishRetriesOnlyWhatFailed: a batch whose messages failed for a
// transient reason, the driver saying which were accepted, is sent again
// without those: nothing is sent twice, and the publish succeeds.
func TestPublishRetriesOnlyWhatFailed(t *testing.T) {
	transient := errors.New("connection reset")
	errs := []error{nil, transient, driver.ErrNotAttempted}
	d := &stubTopic{infos: map[error]driver.ErrorInfo{transient: {Code: driver.Unavailable}},
		errs: []error{&driver.BatchError{Errs: errs}}}
	msgs := []*Message{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	if err := NewTopic(d, fastRetry).Publish(context.Background(), msgs...); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if len(d.batches) != 2 || len(d.batches[1]) != 2 || d.batches[1][0].ID != "b" || d.batches[1][1].ID != "c" {
		t.Fatalf("batches %v, want [a b c] then [b c]", d.batches)
	}
}

// TestPublishMaybeSentSticks: a message that an attempt may have
// delivered stays "may have been sent" when a later attempt of it is
// refused before sending: sending it again could duplicate it.
func TestPublishMaybeSentSticks(t *testing.T) {
	lost := errors.New("connection lost after the write")
	refused := errors.New("refused before the write")
	d := &stubTopic{infos: map[error]driver.ErrorInfo{lost: {Code: driver.Unavailable, MaybeSent: true}, refused: {Code: driver.Unavailable}},
		errs: []error{&driver.BatchError{Errs: []error{nil, lost}}, refused, refused}}
	err := NewTopic(d, fastRetry).Publish(context.Background(), &Message{ID: "a"}, &Message{ID: "b"})
	var be *Error
	if !errors.As(err, &be) || len(be.Messages) != 2 || be.Messages[0] != nil {
		t.Fatalf("got %v, want a sent, b failed", err)
	}
	if !errors.Is(be.Messages[1], ErrMaybeSent) || errors.Is(be.Messages[1], ErrNotSent) {
		t.Fatalf("b: %v, want may have been sent (its first attempt may have delivered it)", be.Messages[1])
	}
	if len(d.batches) != 3 || len(d.batches[1]) != 1 || d.batches[1][0].ID != "b" {
		t.Fatalf("batches %v, want [a b] then [b] twice", d.batches)
	}
}

// TestPublishRefusedBeforeSendingSaysWhich: a Publish whose messages 1 and
// 3 fail validation sends nothing, and its Messages say so for each: the
// refused ones with their own class, the others not sent because another
// message of the call was refused; the text names the first refused one.
func TestPublishRefusedBeforeSendingSaysWhich(t *testing.T) {
	d := &stubTopic{caps: capability.Topic{MaxMessageSize: 64}}
	msgs := []*Message{
		{ID: "a"},
		{ID: "b", Headers: Headers{{"wary-x", "1"}}},
		{ID: "c"},
		{ID: "d", Body: make([]byte, 100)},
	}
	err := NewTopic(d, fastRetry).Publish(context.Background(), msgs...)
	var be *Error
	if !errors.As(err, &be) || be.Op != "publish" || len(be.Messages) != len(msgs) {
		t.Fatalf("got %v, want a publish error with %d Messages", err, len(msgs))
	}
	if !errors.Is(err, ErrNotSent) || errors.Is(err, ErrMaybeSent) || !errors.Is(err, ErrInvalid) {
		t.Errorf("%v: want not sent and invalid (the first refused message's class)", err)
	}
	want := `wary: publish (invalid) [0 of 4 sent, 2 failed]: message 1: message "b": header "wary-x" is reserved`
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("text %q, want it to start with %q", err, want)
	}
	for i, class := range []error{nil, ErrInvalid, nil, ErrTooLarge} {
		m := be.Messages[i]
		if !errors.Is(m, ErrNotSent) {
			t.Errorf("message %d: %v, want not sent", i, m)
		}
		if class != nil && !errors.Is(m, class) {
			t.Errorf("message %d: %v, want %v", i, m, class)
		}
		if other := class == nil; other != errors.Is(m, driver.ErrNotAttempted) || (other && (errors.Is(m, ErrInvalid) || errors.Is(m, ErrTooLarge))) {
			t.Errorf("message %d: %v, want not attempted only when valid itself", i, m)
		}
	}
	if len(d.batches) != 0 {
		t.Errorf("%d batches sent, want none", len(d.batches))
	}
}
