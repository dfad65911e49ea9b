package check

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/internal/seam"
)

func TestOptions(t *testing.T) {
	c := Options{What: "relay options"}
	c.Duration("PollInterval", time.Second, false)
	c.Duration("PurgeInterval", -1, true)
	c.Count("Batch", 3)
	c.Backoff("Retry", broker.Backoff{Initial: time.Millisecond, Max: time.Second, Multiplier: 2})
	if err := c.Err(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	c.Duration("PollInterval", -time.Second, false)
	c.Count("Batch", -1)
	c.Backoff("Retry", broker.Backoff{Initial: time.Second, Max: time.Millisecond, Multiplier: math.NaN()})
	err := c.Err()
	if !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("Err: %v, want broker.ErrInvalid", err)
	}
	for _, want := range []string{"relay options", "PollInterval is negative", "Batch is negative", "Retry.Max is below Initial", "Retry.Multiplier"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Err %q does not say %q", err, want)
		}
	}
}

type part interface{ Ping() string }

type impl struct{}

func (impl) Ping() string { return "pong" }

type provider struct{ d seam.Driver[int] }

func (p provider) Driver() seam.Driver[int] { return p.d }

func TestPart(t *testing.T) {
	got, err := Part[part](provider{seam.NewDriver[int](impl{})}, "the ping part")
	if err != nil || got.Ping() != "pong" {
		t.Fatalf("Part: %v, %v", got, err)
	}
	for name, p := range map[string]seam.Provider[int]{
		"nil store":     nil,
		"no driver":     provider{},
		"the ping part": provider{seam.NewDriver[int](struct{}{})},
	} {
		_, err := Part[part](p, "the ping part")
		if !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want broker.ErrInvalid saying so", name, err)
		}
	}
}

func TestOutboxMessage(t *testing.T) {
	if err := OutboxMessage("m-1", "order-1", 0, "order.placed", broker.Headers{{"tenant", "eu"}}); err != nil {
		t.Fatalf("valid message: %v", err)
	}
	for name, err := range map[string]error{
		"no ID":        OutboxMessage("", "order-1", 1, "t", nil),
		"no aggregate": OutboxMessage("m", " \t", 1, "t", nil),
		"bad UTF-8":    OutboxMessage("m", "order-\xff", 1, "t", nil),
		"negative":     OutboxMessage("m", "order-1", -1, "t", nil),
		"relay header": OutboxMessage("m", "order-1", 1, "t", broker.Headers{{strings.ToUpper(broker.HeaderSequence), "1"}}),
		"bad header":   OutboxMessage("m", "order-1", 1, "t", broker.Headers{{"", "x"}}),
	} {
		if !errors.Is(err, ErrOutboxMessage) {
			t.Errorf("%s: %v, want ErrOutboxMessage", name, err)
		}
	}
}
