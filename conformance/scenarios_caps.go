package conformance

import (
	"bytes"
	"context"
	"fmt"
	"github.com/wary-go/wary/broker/driver"
	"strconv"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
)

// Scenarios for the capability fields that shape what a consumer must
// keep or expect, rather than a single delivery: the redelivery horizon,
// the batch limit, the dedup scope and who keeps the delivery count.

func init() {
	register(
		scenario{"redelivery-horizon", func(_ Capabilities, h *Harness) string {
			if h.HorizonNotKnown != "" {
				return "the harness cannot state the horizon its broker applies: " + h.HorizonNotKnown
			}
			return ""
		}, redeliveryHorizon},
		scenario{"max-batch-size-split", always, batchSplit},
		scenario{"dedup-scope", always, dedupScope},
		scenario{"delivery-count-across-restarts", func(c Capabilities, h *Harness) string {
			if c.DeliveryLimitMode == capability.LimitNone && c.DeliveryLimit == 0 {
				return "the driver declares no delivery limit, so no DeliveryLimitMode"
			}
			if c.DeliveryLimit > 0 && c.DeliveryLimit < restarts+1 {
				return fmt.Sprintf("the delivery limit %d would dead-letter the message before the consumer after %d restarts gets it", c.DeliveryLimit, restarts)
			}
			return needLockWait(c, h)
		}, countAcrossRestarts},
	)
}

// redeliveryHorizon (RedeliveryHorizon): a subscription declares the
// horizon the harness configured on its broker: a retention
// it set, unbounded where the broker keeps messages until they are
// settled, unknown only where the harness says the driver cannot read it.
// An inbox sizes its retention from this value, so a horizon shorter than
// the broker's lets a late copy run its effect twice.
func redeliveryHorizon(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	if got, want := s.Capabilities().RedeliveryHorizon, e.h.RedeliveryHorizon; got != want {
		t.Errorf("the subscription declares RedeliveryHorizon %s, but the broker is configured for %s (Harness.RedeliveryHorizon)",
			capability.HorizonString(got), capability.HorizonString(want))
	}
}

// batchUnlimited is the batch published where the driver declares no
// MaxBatchSize.
const batchUnlimited = 100

// batchSplit (MaxBatchSize): one Publish of more messages than the driver
// declares it accepts in a batch (2×MaxBatchSize+1, or 100 where it
// declares no limit) succeeds: the portable layer splits it into batches
// the broker takes, every message arrives exactly as sent, none twice,
// and where the driver declares an ordering scope, in publish order
// inside each key. A declared limit higher than the broker's fails the
// publish; a lower one or none where there is one shows as a failed or
// partial publish.
func batchSplit(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	n := batchUnlimited
	if e.caps.MaxBatchSize > 0 {
		n = 2*e.caps.MaxBatchSize + 1
	}
	const keys = 5
	want := map[string]*broker.Message{}
	msgs := make([]*broker.Message, n)
	for i := range msgs {
		m := e.msg(t, fmt.Sprintf("batch-%d", i%keys))
		m.Headers.Set("seq", strconv.Itoa(i))
		m.Body = append(m.Body, byte(i), 0, 0xff)
		msgs[i] = m
		want[m.ID] = &broker.Message{ID: m.ID, Key: m.Key, Headers: m.Headers.Clone(), Body: bytes.Clone(m.Body)}
	}
	if err := f.Topic.Publish(ctx, msgs...); err != nil {
		t.Fatalf("publish of %d messages in one call (MaxBatchSize %d): %v", n, e.caps.MaxBatchSize, err)
	}
	got := map[string]bool{}
	last := map[string]int{}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for len(got) < n {
		// Receive what is deliverable and ack it: on a head-of-line
		// broker each key's next message waits for the ack.
		ds, err := s.Receive(rctx, n-len(got))
		if err != nil {
			t.Fatalf("received %d of %d messages of the split batch (MaxBatchSize %d): %v", len(got), n, e.caps.MaxBatchSize, err)
		}
		for _, d := range ds {
			w, ok := want[d.Message.ID]
			switch {
			case !ok:
				t.Fatalf("unexpected message %q", d.Message.ID)
			case got[w.ID]:
				t.Fatalf("%s (seq %s) delivered twice: the split sent a batch twice", w.ID, w.Headers.Get("seq"))
			case !bytes.Equal(d.Message.Body, w.Body) || d.Message.Key != w.Key:
				t.Fatalf("%s arrived changed: key %q body %q, want key %q body %q", w.ID, d.Message.Key, d.Message.Body, w.Key, w.Body)
			}
			for k, v := range w.Headers.All() {
				if d.Message.Headers.Get(k) != v {
					t.Fatalf("%s: header %q = %q, want %q", w.ID, k, d.Message.Headers.Get(k), v)
				}
			}
			got[w.ID] = true
			seq := seqOf(d)
			if p, ok := last[w.Key]; ok && e.caps.Ordering != capability.OrderNone && seq < p {
				t.Fatalf("ordering %s declared, but in key %s seq %d arrived after %d: the split batches went out of order", e.caps.Ordering, w.Key, seq, p)
			}
			last[w.Key] = seq
			ackAll(ctx, t, d)
		}
	}
	e.expectNone(ctx, t, s, "every message of the split batch was delivered once; nothing else may arrive")
}

// dedupScope (DedupScope): one message ID published in two message groups
// (keys) and then again in the first. A window scoped to the message group
// drops only the repeat in the first group: two copies arrive, one per
// group. A window scoped to the queue drops both repeats: one copy
// arrives. No window (DedupNone): all three arrive. A window declared
// without a scope, or a scope without a window, fails.
func dedupScope(t T, e *env) {
	ctx, f := e.setup(t)
	c := e.caps
	var want int
	switch {
	case c.DedupWindow <= 0 && c.DedupScope != capability.DedupNone:
		t.Fatalf("dedup scope %s declared without a dedup window", c.DedupScope)
	case c.DedupWindow <= 0:
		want = 3
	case c.DedupScope == capability.DedupQueue:
		want = 1
	case c.DedupScope == capability.DedupMessageGroup:
		want = 2
	default:
		t.Fatalf("dedup window %s declared with scope %s", c.DedupWindow, c.DedupScope)
	}
	s := e.sub(ctx, t, f)
	a := e.msg(t, "dedup-group-a")
	b := *a
	b.Key, b.Headers = "dedup-group-b", driver.Headers{{"copy", "b"}}
	again := *a
	again.Headers = driver.Headers{{"copy", "a-again"}}
	// One publish each, so that the copies are not one batch.
	publish(ctx, t, f, a)
	publish(ctx, t, f, &b)
	publish(ctx, t, f, &again)
	var copies []string
	groups := map[string]bool{}
	for range want {
		ds := recvWithin(ctx, t, s, 1, 30*time.Second)
		if len(ds) == 0 {
			t.Fatalf("dedup window %s, scope %s: one ID published in group a, group b, group a again must arrive %d times, but arrived within 30s only as %v",
				c.DedupWindow, c.DedupScope, want, copies)
		}
		d := ds[0]
		if d.Message.ID != a.ID {
			t.Fatalf("unexpected message %s", d.Message.ID)
		}
		copies = append(copies, fmt.Sprintf("key %s copy %q", d.Message.Key, d.Message.Headers.Get("copy")))
		groups[d.Message.Key] = true
		ackAll(ctx, t, d)
	}
	ds := recvWithin(ctx, t, s, 1, e.h.Quiet)
	if len(ds) > 0 {
		copies = append(copies, fmt.Sprintf("key %s copy %q", ds[0].Message.Key, ds[0].Message.Headers.Get("copy")))
		t.Fatalf("dedup window %s, scope %s: one ID published in group a, group b, group a again must arrive %d times, but arrived as %v",
			c.DedupWindow, c.DedupScope, want, copies)
	}
	if want == 2 && len(groups) != 2 {
		t.Fatalf("dedup scoped to the message group: want one copy per group, got %v", copies)
	}
}

// restarts is how many consumers close holding the message in
// countAcrossRestarts.
const restarts = 2

// countAcrossRestarts (DeliveryLimitMode): a message is received and left
// unsettled by a consumer that then closes, twice, and the third consumer receives it. Where the broker
// counts (LimitNative) the count survives each consumer: the third
// delivery is attempt 3. Where the library counts (LimitEmulated) the
// count lives in the consumer and is lost with it: the third delivery is
// attempt 1 or 2 (a driver may mark a handed-over message as a
// redelivery, as Kafka's does from its commit metadata, but cannot know
// how often it was delivered). One restart cannot tell the modes apart
// (both may say 2), which is why the scenario restarts twice.
func countAcrossRestarts(t T, e *env) {
	c := e.caps
	switch {
	case c.DeliveryLimit == 0:
		t.Fatalf("DeliveryLimitMode %s declared without a DeliveryLimit", c.DeliveryLimitMode)
	case c.DeliveryLimitMode == capability.LimitNone:
		t.Fatalf("DeliveryLimit %d declared with DeliveryLimitMode none", c.DeliveryLimit)
	}
	ctx, f := e.setup(t)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	for i := 1; i <= restarts; i++ {
		s, err := f.Subscribe(ctx)
		if err != nil {
			t.Fatalf("subscribe: %v", err)
		}
		d, _ := e.recvID(ctx, t, s, m.ID)
		if c.DeliveryLimitMode == capability.LimitNative && d.Attempt != i {
			t.Errorf("native count: delivery %d (consumer %d) reports attempt %d", i, i, d.Attempt)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		e.wait(ctx, t, lockWait(c))
	}
	s := e.sub(ctx, t, f)
	d, _ := e.recvID(ctx, t, s, m.ID)
	ackAll(ctx, t, d)
	survived := restarts + 1
	switch c.DeliveryLimitMode {
	case capability.LimitNative:
		if d.Attempt != survived {
			t.Fatalf("DeliveryLimitMode native: after %d consumers closed holding the message, the next delivery reports attempt %d, want %d: the broker's count did not survive the consumers", restarts, d.Attempt, survived)
		}
	case capability.LimitEmulated:
		if d.Attempt < 1 || d.Attempt >= survived {
			t.Fatalf("DeliveryLimitMode emulated: after %d consumers closed holding the message, the next delivery reports attempt %d, want 1 or 2: the count survived the consumers, as only a count the broker keeps (native) does", restarts, d.Attempt)
		}
	default:
		t.Fatalf("unknown DeliveryLimitMode %s", c.DeliveryLimitMode)
	}
}
