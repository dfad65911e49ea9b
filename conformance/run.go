package conformance

import (
	"context"
	"errors"
	"fmt"
	"github.com/wary-go/wary/broker/driver"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/goleak"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
)

// scenario is one named check. need returns "" when the scenario applies to
// the capabilities, or the reason it does not.
type scenario struct {
	name string
	need func(c Capabilities, h *Harness) string
	run  func(t T, e *env)
}

// always applies.
func always(Capabilities, *Harness) string { return "" }

var scenarios []scenario

func register(s ...scenario) { scenarios = append(scenarios, s...) }

// Scenarios returns the names of every scenario, in the order Run runs them.
func Scenarios() []string {
	var names []string
	for _, s := range scenarios {
		names = append(names, s.name)
	}
	return names
}

// Run runs every scenario against the harness, each as a subtest named
// after it. A scenario whose capability the driver does not declare is
// reported as skipped with "not applicable:" and the reason; every other
// scenario must pass. Run checks at the end that the scenarios left no
// goroutine running (go.uber.org/goleak), so call it from a test that runs
// alone (not t.Parallel with other broker tests). P is *testing.T:
//
//	func TestConformance(t *testing.T) { conformance.Run(t, harness) }
//
// Run is go test's reporter over the scenarios, as Probe is an operator's.
func Run[P interface {
	T
	Run(name string, f func(t P)) bool
}](t P, h Harness) {
	t.Helper()
	h.defaults()
	before := goleak.IgnoreCurrent()
	var caps Capabilities
	// A subtest of its own, so that what the harness registers for cleanup
	// is released before the leak check.
	probed := false
	if !t.Run("capabilities", func(t P) {
		caps, probed = probeCaps(t, &h), true
		t.Logf("%s: capabilities: %s", h.Name, caps)
	}) {
		t.Fatalf("%s: cannot read the capabilities; no scenario can run", h.Name)
	}
	if !probed {
		// -run selected some scenarios only: probe anyway, releasing what
		// the harness registers for cleanup at once.
		early := &cleanupNow{T: t}
		func() {
			defer early.run()
			caps = probeCaps(early, &h)
		}()
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t P) {
			if why := s.need(caps, &h); why != "" {
				t.Skipf("not applicable: %s", why)
			}
			e := &env{h: &h, caps: caps}
			s.run(t, e)
		})
	}
	t.Run("no-goroutine-leak", func(t P) {
		if err := goleak.Find(before); err != nil {
			t.Fatalf("goroutines left running after the scenarios closed everything they opened: %v", err)
		}
	})
}

// cleanupNow collects the cleanups registered on it, to run them early.
type cleanupNow struct {
	T
	fns []func()
}

func (c *cleanupNow) Cleanup(f func()) { c.fns = append(c.fns, f) }

func (c *cleanupNow) run() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
}

// Capabilities are the two halves of a fixture's promise, each read from
// the side that owns it: the topic's (publish) and the subscription's
// (delivery). Scenarios check each field against the live broker through
// the side that declares it.
type Capabilities struct {
	capability.Topic
	capability.Subscription
}

// String renders both halves on one line.
func (c Capabilities) String() string {
	return "topic: " + c.Topic.String() + "; subscription: " + c.Subscription.String()
}

// probeCaps reads the topic's half from a fixture's topic and the
// subscription's half from a subscription opened on it.
func probeCaps(t T, h *Harness) Capabilities {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, err := h.Setup(ctx, t, defaultConfig)
	if err != nil {
		t.Fatalf("harness setup: %v", err)
	}
	defer f.Topic.Close()
	sub, err := f.Subscribe(ctx)
	if err != nil {
		t.Fatalf("harness subscribe: %v", err)
	}
	defer sub.Close()
	return Capabilities{f.Topic.Capabilities(), sub.Capabilities()}
}

// defaults fills in the harness fields left zero.
func (h *Harness) defaults() {
	if h.Quiet <= 0 {
		h.Quiet = time.Second
	}
	if h.MaxWait <= 0 {
		h.MaxWait = 30 * time.Second
	}
	if h.Wait == nil {
		h.Wait = sleep
	}
}

var defaultConfig = Config{LockTimeout: 2 * time.Second, DeliveryLimit: 3, DedupWindow: 3 * time.Second}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// env is one scenario's view of the harness.
type env struct {
	h    *Harness
	caps Capabilities
	n    atomic.Int64
}

// setup builds a fresh fixture with the default config, checks it declares
// the probed capabilities, and returns it with a context for the scenario.
func (e *env) setup(t T) (context.Context, *Fixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+2*e.h.MaxWait)
	t.Cleanup(cancel)
	f, err := e.h.Setup(ctx, t, defaultConfig)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Cleanup(func() { _ = f.Topic.Close() })
	c := f.Topic.Capabilities()
	c.Source.Read = sameRead(c.Source.Read, e.caps.Topic.Source.Read)
	if !reflect.DeepEqual(c, e.caps.Topic) {
		t.Fatalf("fixture's topic declares other capabilities than the first: %s", c)
	}
	return ctx, f
}

// sameRead returns first when both a fixture's and the first fixture's
// capabilities were read from the broker: each fixture is an entity of its
// own, which Source.Read may name.
func sameRead(read, first string) string {
	if read != "" && first != "" {
		return first
	}
	return read
}

// sub opens one more consumer, checks it declares the probed delivery
// half, and closes it at cleanup.
func (e *env) sub(ctx context.Context, t T, f *Fixture) *broker.Subscription {
	t.Helper()
	s, err := f.Subscribe(ctx)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := s.Capabilities()
	c.Source.Read = sameRead(c.Source.Read, e.caps.Subscription.Source.Read)
	if !reflect.DeepEqual(c, e.caps.Subscription) {
		t.Fatalf("fixture's subscription declares other capabilities than the first: %s", c)
	}
	return s
}

// dlq opens the dead-letter queue.
func (e *env) dlq(ctx context.Context, t T, f *Fixture) *broker.Subscription {
	t.Helper()
	if f.DeadLetters == nil {
		t.Fatalf("the driver declares dead-lettering but the fixture has no DeadLetters opener")
	}
	s, err := f.DeadLetters(ctx)
	if err != nil {
		t.Fatalf("open dead letters: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// msg builds a message with a unique ID, the key (or a default one where
// the broker requires keys) and a body naming it.
func (e *env) msg(t T, key string) *broker.Message {
	n := e.n.Add(1)
	id := fmt.Sprintf("%s-%d-%d", sanitize(t.Name()), time.Now().UnixNano(), n)
	if key == "" && e.caps.KeyRequired {
		key = "k"
	}
	return &broker.Message{ID: id, Key: key, Body: []byte("body of " + id), Headers: driver.Headers{{"n", strconv.FormatInt(n, 10)}}}
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 40 {
		b = b[len(b)-40:]
	}
	return string(b)
}

func publish(ctx context.Context, t T, f *Fixture, msgs ...*broker.Message) {
	t.Helper()
	if err := f.Topic.Publish(ctx, msgs...); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// recvWithin receives until n deliveries arrived or d passed, and returns
// what arrived.
func recvWithin(ctx context.Context, t T, s *broker.Subscription, n int, d time.Duration) []*broker.Delivery {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var out []*broker.Delivery
	for len(out) < n {
		ds, err := s.Receive(rctx, n-len(out))
		if err != nil {
			if rctx.Err() != nil && ctx.Err() == nil {
				return out
			}
			t.Fatalf("receive: %v", err)
		}
		out = append(out, ds...)
	}
	return out
}

// recv receives exactly n deliveries within the scenario's patience or
// fails.
func (e *env) recv(ctx context.Context, t T, s *broker.Subscription, n int) []*broker.Delivery {
	t.Helper()
	ds := recvWithin(ctx, t, s, n, 30*time.Second)
	if len(ds) < n {
		t.Fatalf("received %d of %d expected deliveries within 30s: %v", len(ds), n, ids(ds))
	}
	return ds
}

// recvID receives until the delivery of id arrives, settling nothing, and
// returns it with the others received on the way.
func (e *env) recvID(ctx context.Context, t T, s *broker.Subscription, id string) (*broker.Delivery, []*broker.Delivery) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var others []*broker.Delivery
	for time.Now().Before(deadline) {
		for _, d := range recvWithin(ctx, t, s, 1, time.Until(deadline)) {
			if d.Message.ID == id {
				return d, others
			}
			others = append(others, d)
		}
	}
	t.Fatalf("message %s not delivered within 30s (got instead %v)", id, ids(others))
	return nil, nil
}

// expectNone fails if anything is delivered within the harness's Quiet
// period; what arrives is nacked so that it is not held.
func (e *env) expectNone(ctx context.Context, t T, s *broker.Subscription, why string) {
	t.Helper()
	ds := recvWithin(ctx, t, s, 1, e.h.Quiet)
	if len(ds) > 0 {
		t.Fatalf("%s, but received %s (attempt %d)", why, ds[0].Message.ID, ds[0].Attempt)
	}
}

func ids(ds []*broker.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Message.ID)
	}
	return out
}

func ackAll(ctx context.Context, t T, ds ...*broker.Delivery) {
	t.Helper()
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			t.Fatalf("ack %s: %v", d.Message.ID, err)
		}
	}
}

func mustIs(t T, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one matching %v", targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %q does not match %v", err, target)
		}
	}
}

// wait lets d of broker time pass. A wait longer than the harness's
// MaxWait fails the scenario: scenarios that need one are not applicable
// (needWait) only where the harness says why the broker cannot be
// configured shorter.
func (e *env) wait(ctx context.Context, t T, d time.Duration) {
	t.Helper()
	if d > e.h.MaxWait {
		t.Fatalf("the scenario waits %s of broker time, over the harness's MaxWait (%s): configure the broker shorter "+
			"(Config asks for a lock timeout of %s and a dedup window of %s), raise MaxWait, or set Harness.FixedWaits "+
			"to the reason the broker cannot be configured shorter", d, e.h.MaxWait, defaultConfig.LockTimeout, defaultConfig.DedupWindow)
	}
	e.h.Wait(ctx, d)
}

// needWait reports a reason when the scenario would wait longer than the
// harness allows and the harness says its broker cannot be configured
// shorter. Without that reason the scenario runs, and fails when it
// waits.
func needWait(d time.Duration, h *Harness, what string) string {
	if d > h.MaxWait && h.FixedWaits != "" {
		return fmt.Sprintf("%s (%s) is longer than the harness's MaxWait (%s), and the broker cannot be configured shorter: %s", what, d, h.MaxWait, h.FixedWaits)
	}
	return ""
}

// lockWait is how long a scenario waits for a lock to expire: half as long
// again as the declared lock timeout (0: no lock timeout, no wait).
func lockWait(c Capabilities) time.Duration { return c.LockTimeout + c.LockTimeout/2 }

// needLockWait is needWait for scenarios that let a lock expire.
func needLockWait(c Capabilities, h *Harness) string {
	return needWait(lockWait(c), h, "one and a half lock timeouts")
}
