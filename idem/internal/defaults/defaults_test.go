package defaults

import (
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
)

func TestRelay(t *testing.T) {
	var n int
	var b broker.Backoff
	var p time.Duration
	Relay(&n, &b, &p)
	if n != 10 || b != (broker.Backoff{Initial: time.Second, Max: 5 * time.Minute}) || p != 30*time.Second {
		t.Errorf("zero fields: %d %+v %v", n, b, p)
	}
	n, b, p = 3, broker.Backoff{Initial: time.Millisecond}, time.Second
	Relay(&n, &b, &p)
	if n != 3 || b != (broker.Backoff{Initial: time.Millisecond}) || p != time.Second {
		t.Errorf("set fields changed: %d %+v %v", n, b, p)
	}
}

func TestInboxMaxAttempts(t *testing.T) {
	for in, want := range map[int]int{0: 5, -1: 5, 1: 1, 7: 7} {
		n := in
		InboxMaxAttempts(&n)
		if n != want {
			t.Errorf("InboxMaxAttempts(%d) = %d, want %d", in, n, want)
		}
	}
}
