package broker

import (
	"context"
	"errors"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/redact"
)

// stubTopic fails SendBatch with the queued errors, then succeeds.
type stubTopic struct {
	caps    capability.Topic
	errs    []error
	infos   map[error]driver.ErrorInfo
	batches [][]*driver.Message
}

func (s *stubTopic) SendBatch(_ context.Context, msgs []*driver.Message) error {
	s.batches = append(s.batches, msgs)
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return err
	}
	return nil
}
func (s *stubTopic) Capabilities() capability.Topic      { return s.caps }
func (s *stubTopic) Classify(err error) driver.ErrorInfo { return s.infos[err] }
func (s *stubTopic) As(any) bool                         { return false }
func (s *stubTopic) ErrorAs(error, any) bool             { return false }
func (s *stubTopic) Close() error                        { return nil }

var fastRetry = &TopicOptions{Retry: &RetryPolicy{Attempts: 3, Backoff: Backoff{Initial: time.Microsecond, Max: time.Microsecond}}}

func TestPublishRetriesTransientAndKeepsMaybeSent(t *testing.T) {
	transient := errors.New("connection reset after write")
	d := &stubTopic{errs: []error{transient}, infos: map[error]driver.ErrorInfo{transient: {Code: driver.Unavailable, MaybeSent: true}}}
	top := NewTopic(d, fastRetry)
	m := &Message{Body: []byte("x")}
	if err := top.Publish(context.Background(), m); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if len(d.batches) != 2 || d.batches[0][0].ID != d.batches[1][0].ID || m.ID == "" {
		t.Fatalf("retry must resend the same ID: %d batches", len(d.batches))
	}
}

func TestPublishGivesUpWithMaybeSent(t *testing.T) {
	maybe := errors.New("confirm timed out")
	notSent := errors.New("refused before write")
	d := &stubTopic{errs: []error{maybe, notSent, notSent}, infos: map[error]driver.ErrorInfo{
		maybe: {Code: driver.Unavailable, MaybeSent: true}, notSent: {Code: driver.Unavailable}}}
	err := NewTopic(d, fastRetry).Publish(context.Background(), &Message{})
	if !errors.Is(err, ErrMaybeSent) || errors.Is(err, ErrNotSent) || !errors.Is(err, ErrRetryable) {
		t.Fatalf("after a maybe-sent attempt the final error must say maybe sent: %v", err)
	}
	if len(d.batches) != 3 {
		t.Fatalf("attempts = %d, want 3", len(d.batches))
	}
}

func TestPublishDoesNotRetryPermanent(t *testing.T) {
	perm := errors.New("no such exchange")
	d := &stubTopic{errs: []error{perm}, infos: map[error]driver.ErrorInfo{perm: {Code: driver.NotFound}}}
	err := NewTopic(d, fastRetry).Publish(context.Background(), &Message{})
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrNotSent) || errors.Is(err, ErrRetryable) || !errors.Is(err, perm) {
		t.Fatalf("got %v", err)
	}
	if len(d.batches) != 1 {
		t.Fatalf("attempts = %d, want 1", len(d.batches))
	}
}

func TestPublishSplitsBatches(t *testing.T) {
	d := &stubTopic{caps: capability.Topic{MaxBatchSize: 10}}
	msgs := make([]*Message, 25)
	for i := range msgs {
		msgs[i] = &Message{Key: "k"}
	}
	if err := NewTopic(d, nil).Publish(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	if got := []int{len(d.batches[0]), len(d.batches[1]), len(d.batches[2])}; len(d.batches) != 3 || got[2] != 5 {
		t.Fatalf("batches %v", got)
	}
}

func TestValidation(t *testing.T) {
	d := &stubTopic{caps: capability.Topic{KeyRequired: true, OrderingKey: "MessageGroupId", MaxMessageSize: 10}}
	top := NewTopic(d, nil)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		m    *Message
		want error
	}{
		"no key":       {&Message{ID: "a"}, ErrInvalid},
		"bad header":   {&Message{ID: "a", Key: "k", Headers: Headers{{"h", "\xff"}}}, ErrInvalid},
		"empty header": {&Message{ID: "a", Key: "k", Headers: Headers{{"", "v"}}}, ErrInvalid},
		"too large":    {&Message{ID: "a", Key: "k", Body: make([]byte, 9)}, ErrTooLarge},
		"nil":          {nil, ErrInvalid},
	} {
		err := top.Publish(ctx, tc.m)
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrNotSent) {
			t.Errorf("%s: %v, want %v and not sent", name, err, tc.want)
		}
	}
	if len(d.batches) != 0 {
		t.Fatalf("invalid messages reached the driver")
	}
}

func TestURLParamsRejectUnknown(t *testing.T) {
	u, _ := url.Parse("mem://orders?profile=queue&bogus=1&alsobad=2")
	p := driver.NewURLParams(u)
	_ = p.Get("profile")
	err := p.Done()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "alsobad, bogus") {
		t.Fatalf("got %v", err)
	}
}

func TestRedactHidesSecrets(t *testing.T) {
	u, _ := url.Parse("amqp://guest:hunter2@host:5672/?sas_key=abc123&token=tok&SharedAccessKeyName=root")
	s := redact.URL(u)
	for _, secret := range []string{"hunter2", "abc123", "tok&"} {
		if strings.Contains(s, secret) {
			t.Fatalf("redacted URL %q still has %q", s, secret)
		}
	}
	if !strings.Contains(s, "root") {
		t.Fatalf("redacted URL %q lost a non-secret", s)
	}
	_, err := OpenTopic(context.Background(), "nosuch://guest:hunter2@host/x")
	if err == nil || strings.Contains(err.Error(), "hunter2") || !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown scheme error %v", err)
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i, w := range want {
		if got := b.Ceiling(i + 1); got != w*time.Millisecond {
			t.Errorf("Ceiling(%d) = %s, want %s", i+1, got, w*time.Millisecond)
		}
	}
	// Full jitter: every delay lies in [0, ceiling], and they differ.
	seen := map[time.Duration]bool{}
	for i := 0; i < 200; i++ {
		d := b.Delay(3)
		if d < 0 || d > 40*time.Millisecond {
			t.Fatalf("Delay(3) = %s, outside [0, 40ms]", d)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Fatalf("Delay(3) took only %d distinct values in 200 draws: no jitter", len(seen))
	}
	// Huge attempts and bad multipliers stay bounded and take constant time.
	for _, m := range []float64{math.NaN(), math.Inf(1), -3, 0} {
		bb := Backoff{Initial: time.Millisecond, Max: time.Second, Multiplier: m}
		if got := bb.Ceiling(2); got != 2*time.Millisecond {
			t.Errorf("multiplier %v: Ceiling(2) = %s, want the default multiplier's 2ms", m, got)
		}
	}
	if got := b.Ceiling(math.MaxInt); got != 50*time.Millisecond {
		t.Errorf("Ceiling(MaxInt) = %s, want the cap", got)
	}
}

func TestClassOfMatchesErrorIs(t *testing.T) {
	for c := driver.Unknown; c <= driver.PermissionDenied; c++ {
		class := driver.ClassOf(c)
		if c == driver.Unknown {
			if class != nil {
				t.Fatalf("driver.ClassOf(unknown) = %v, want nil", class)
			}
			continue
		}
		if class == nil {
			t.Fatalf("driver.ClassOf(%s) = nil", c)
		}
		if err := newError("receive", c, false, errors.New("x")); !errors.Is(err, class) {
			t.Errorf("an error of code %s does not match driver.ClassOf: %v", c, class)
		}
	}
}

func TestURLParamsTypedValues(t *testing.T) {
	u, _ := url.Parse("mem://t?limit=3&lock=30s&ordered&heartbeat=S3cr3tPW&max=99")
	p := driver.NewURLParams(u)
	if got := p.Int("limit", 0, 0, 10); got != 3 {
		t.Fatalf("limit = %d", got)
	}
	if got := p.Duration("lock", 0, 0, time.Hour); got != 30*time.Second {
		t.Fatalf("lock = %s", got)
	}
	if !p.Bool("ordered", false) {
		t.Fatal("ordered with an empty value should be true")
	}
	p.Duration("heartbeat", time.Second, 0, time.Hour)
	p.Int("max", 0, 0, 10)
	err := p.Done()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "heartbeat") || !strings.Contains(err.Error(), "max") {
		t.Fatalf("Done = %v, want ErrInvalid naming heartbeat and max", err)
	}
	if strings.Contains(err.Error(), "S3cr3tPW") {
		t.Fatalf("Done echoes a value: %v", err)
	}
}

func TestPublishRejectsReservedHeadersAndBadIDs(t *testing.T) {
	top := NewTopic(&stubTopic{}, nil)
	defer top.Close()
	ctx := context.Background()
	for name, m := range map[string]*Message{
		"reserved key header":    {ID: "a", Headers: Headers{{"wary-key", "spoof"}}},
		"reserved in upper case": {ID: "a", Headers: Headers{{"WARY-Prior-Attempts", "99"}}},
		"dead-letter reason":     {ID: "a", Headers: Headers{{driver.HeaderDeadLetterReason, "x"}}},
		"ID with NUL":            {ID: "a\x00b"},
		"ID with newline":        {ID: "a\nb"},
		"ID not UTF-8":           {ID: "a\xffb"},
		"ID over the limit":      {ID: strings.Repeat("i", driver.MaxIDLen+1)},
		"ID of one space":        {ID: " "},
		"ID of white space":      {ID: "\u00a0\t\u3000"},
		"empty header name":      {ID: "a", Headers: Headers{{"", "v"}}},
		"header value not UTF-8": {ID: "a", Headers: Headers{{"h", "\xff"}}},
		"key not UTF-8":          {ID: "a", Key: "\xff"},
	} {
		err := top.Publish(ctx, m)
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrNotSent) {
			t.Errorf("%s: Publish = %v, want ErrInvalid and ErrNotSent", name, err)
		}
	}
	ok := &Message{ID: strings.Repeat("i", driver.MaxIDLen), Headers: Headers{
		{HeaderAggregateID, "order-1"}, {HeaderAggregateVersion, "2"}, {HeaderSequence, "2"}, {HeaderType, "order.paid"}, {"traceparent", "00-x"}, {"wary", "not the prefix"},
	}}
	if err := top.Publish(ctx, ok); err != nil {
		t.Fatalf("event-identity headers and a driver.MaxIDLen ID: %v", err)
	}
	for _, id := range []string{" a", "a b", "\u00a0x"} {
		if err := driver.ValidateID(id); err != nil {
			t.Errorf("driver.ValidateID(%q) = %v; white space beside other characters is an ID", id, err)
		}
	}
	if err := driver.ValidateHeaders(Headers{{"wary-x", "v"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("driver.ValidateHeaders(a reserved name) = %v, want ErrInvalid", err)
	}
}

func TestPublishRejectsHeadersOverTheirLimit(t *testing.T) {
	st := &stubTopic{caps: capability.Topic{MaxHeaderSize: 100}}
	top := NewTopic(st, nil)
	defer top.Close()
	err := top.Publish(context.Background(), &Message{ID: "a", Headers: Headers{{"h", strings.Repeat("v", 100)}}})
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrNotSent) || len(st.batches) != 0 {
		t.Fatalf("Publish = %v (batches %d), want ErrTooLarge and ErrNotSent before sending", err, len(st.batches))
	}
	if err := top.Publish(context.Background(), &Message{ID: "b", Headers: Headers{{"h", strings.Repeat("v", 99)}}}); err != nil {
		t.Fatalf("headers at the limit: %v", err)
	}
}
