package rabbit_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/rabbit"
)

const (
	shareKeys   = 16
	sharePerKey = 50
	shareParts  = 4
)

// keyPartition is the topic's choice, FNV-1a(key) mod n, computed here
// independently of the driver.
func keyPartition(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// shareRun is the shared record of a test where several subscriptions
// consume shares of one partitioned queue.
type shareRun struct {
	t       *testing.T
	log     *conformance.OrderLog
	hist    *conformance.History
	want    int
	done    chan struct{}
	mu      sync.Mutex
	seen    map[string]bool
	doneOne sync.Once
}

func newShareRun(t *testing.T) *shareRun {
	return &shareRun{t: t, log: conformance.NewOrderLog(), hist: conformance.NewHistory(), want: shareKeys * sharePerKey, done: make(chan struct{}), seen: map[string]bool{}}
}

// publish sends sharePerKey messages for each of shareKeys keys, in
// rounds, and returns the keys by partition.
func (r *shareRun) publish(ctx context.Context, topic *broker.Topic) map[int][]string {
	byPart := map[int][]string{}
	keys := make([]string, shareKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%02d", i)
		p := keyPartition(keys[i], shareParts)
		byPart[p] = append(byPart[p], keys[i])
	}
	for seq := range sharePerKey {
		msgs := make([]*broker.Message, len(keys))
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = fmt.Sprintf("%s#%d", k, seq)
			msgs[i] = &broker.Message{ID: ids[i], Key: k, Headers: broker.Headers{{"seq", strconv.Itoa(seq)}}, Body: []byte("x")}
		}
		if err := topic.Publish(ctx, msgs...); err != nil {
			r.t.Fatalf("publish round %d: %v", seq, err)
		}
		r.hist.Sent(ids...)
	}
	return byPart
}

// handler records deliveries for a subscription with share; got collects
// the keys it received. extra, if not nil, runs after the record.
func (r *shareRun) handler(name string, share []int, got *sync.Map, extra func()) broker.Handler {
	return func(ctx context.Context, d *broker.Delivery) error {
		key := d.Message.Key
		seq, err := strconv.Atoi(d.Message.Headers.Get("seq"))
		if err != nil {
			r.t.Errorf("%s: %s has no seq header", name, d.Message.ID)
			return nil
		}
		end := r.log.Start(key, seq)
		defer end()
		p := keyPartition(key, shareParts)
		var ad *amqp.Delivery
		if !d.Message.As(&ad) || ad.RoutingKey != strconv.Itoa(p) {
			rk := "?"
			if ad != nil {
				rk = ad.RoutingKey
			}
			r.t.Errorf("%s: %s came through routing key %s, want partition %d", name, d.Message.ID, rk, p)
		}
		if !slices.Contains(share, p) {
			r.t.Errorf("%s (share %v): received key %s of partition %d", name, share, key, p)
		}
		got.Store(key, true)
		r.hist.Delivered(d.Message.ID)
		if extra != nil {
			extra()
		}
		r.mu.Lock()
		r.seen[d.Message.ID] = true
		all := len(r.seen) == r.want
		r.mu.Unlock()
		if all {
			r.doneOne.Do(func() { close(r.done) })
		}
		return nil
	}
}

// check waits until every message was delivered.
func (r *shareRun) check(ctx context.Context) {
	r.t.Helper()
	select {
	case <-r.done:
	case <-ctx.Done():
		r.mu.Lock()
		n := len(r.seen)
		r.mu.Unlock()
		r.t.Fatalf("only %d of %d messages delivered: %v", n, r.want, r.hist.Check())
	}
}

// verify checks the record: nothing lost, per-key order, no overlap.
func (r *shareRun) verify() {
	r.t.Helper()
	rep := r.hist.Check()
	if !rep.Valid() || rep.Sent != r.want {
		r.t.Errorf("history: %v", rep)
	}
	if v := r.log.FirstDeliveryOrderViolations(); len(v) > 0 {
		r.t.Errorf("per-key order violated: %v", v)
	}
	if o := r.log.Overlaps(); len(o) > 0 {
		r.t.Errorf("handlers of one key overlapped: %v", o)
	}
	r.t.Logf("history: %v", rep)
}

func keysOf(m *sync.Map) []string {
	var ks []string
	m.Range(func(k, _ any) bool { ks = append(ks, k.(string)); return true })
	slices.Sort(ks)
	return ks
}

func wantKeys(byPart map[int][]string, share []int) []string {
	var ks []string
	for _, p := range share {
		ks = append(ks, byPart[p]...)
	}
	slices.Sort(ks)
	return ks
}

// runSub runs sub with PerKey until ctx is done and reports Run's error on
// the returned channel.
func runSub(ctx context.Context, sub *broker.Subscription, h broker.Handler) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- sub.Run(ctx, h, &broker.RunOptions{Concurrency: 4, PerKey: true}) }()
	return errc
}

// Two subscriptions with disjoint shares of 4 partitions both receive,
// each only its partitions' keys, per-key order holds and nothing is lost.
func TestAssignedSharesSpreadPartitions(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	name := uniqueName("assigned")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, Partitions: shareParts})
	topic, err := rabbit.OpenTopic(ctx, c, top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()

	shares := [][]int{rabbit.Share(shareParts, 2, 0), rabbit.Share(shareParts, 2, 1)}
	subs := make([]*broker.Subscription, len(shares))
	for i, share := range shares {
		o := &rabbit.SubscriptionOptions{NackDelay: true}
		o.Assigned = share
		subs[i], err = rabbit.OpenSubscription(ctx, c, top, o)
		if err != nil {
			t.Fatal(err)
		}
		defer subs[i].Close()
		if caps := subs[i].Capabilities(); caps.Ordering != capability.OrderPartition {
			t.Fatalf("ordering %s, want partition", caps.Ordering)
		}
	}

	r := newShareRun(t)
	byPart := r.publish(ctx, topic)
	for _, share := range shares {
		if len(wantKeys(byPart, share)) == 0 {
			t.Fatalf("no key hashes to share %v: pick other keys", share)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make([]sync.Map, len(subs))
	errcs := make([]<-chan error, len(subs))
	for i, sub := range subs {
		errcs[i] = runSub(rctx, sub, r.handler(fmt.Sprintf("sub %d", i), shares[i], &got[i], nil))
	}
	r.check(ctx)
	cancel()
	for i, errc := range errcs {
		if err := <-errc; err != nil {
			t.Errorf("run %d: %v", i, err)
		}
	}
	r.verify()
	for i, share := range shares {
		if g, w := keysOf(&got[i]), wantKeys(byPart, share); !slices.Equal(g, w) {
			t.Errorf("sub %d (share %v) received keys %v, want %v", i, share, g, w)
		}
	}
}

// A standby opened with the same share as an active subscription receives
// nothing while that one is open, takes over when it closes mid-stream,
// and per-key order holds across the two; the other share is unaffected.
func TestAssignedStandbyTakesOver(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	name := uniqueName("standby")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, Partitions: shareParts})
	topic, err := rabbit.OpenTopic(ctx, c, top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()

	shareA, shareB := []int{0, 1}, []int{2, 3}
	open := func(share []int) *broker.Subscription {
		o := &rabbit.SubscriptionOptions{NackDelay: true}
		o.Assigned = share
		sub, err := rabbit.OpenSubscription(ctx, c, top, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Close() })
		return sub
	}
	// Registration order decides: the consumer registers when receiving
	// starts, so the active one runs first, then its standby.
	active, standby, other := open(shareA), open(shareA), open(shareB)

	r := newShareRun(t)
	byPart := r.publish(ctx, topic)
	const stopAfter = 60
	if n := len(wantKeys(byPart, shareA)) * sharePerKey; n < 2*stopAfter {
		t.Fatalf("share %v holds only %d messages: pick other keys", shareA, n)
	}

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	actx, stopActive := context.WithCancel(rctx)
	defer stopActive()
	var activeClosing atomic.Bool
	var handledByActive, handledByStandby atomic.Int64
	var gotA, gotS, gotB sync.Map
	// The active one stops receiving after stopAfter deliveries: its Run
	// ends once its handlers have settled what it holds.
	activeReceived := make(chan struct{})
	errA := runSub(actx, active, r.handler("active", shareA, &gotA, func() {
		switch handledByActive.Add(1) {
		case 1:
			close(activeReceived)
		case stopAfter:
			stopActive()
		}
	}))
	select {
	case <-activeReceived: // registered
	case <-ctx.Done():
		t.Fatal("the active subscription received nothing")
	}
	errS := runSub(rctx, standby, r.handler("standby", shareA, &gotS, func() {
		handledByStandby.Add(1)
		if !activeClosing.Load() {
			t.Errorf("the standby received while the active subscription was open")
		}
	}))
	errB := runSub(rctx, other, r.handler("other", shareB, &gotB, nil))

	if err := <-errA; err != nil {
		t.Fatalf("active run: %v", err)
	}
	activeClosing.Store(true)
	// RabbitMQ requeues what the active one had not acked and makes the
	// standby active on both partitions.
	if err := active.Close(); err != nil {
		t.Fatalf("close active: %v", err)
	}
	r.check(ctx)
	cancel()
	for _, errc := range []<-chan error{errS, errB} {
		if err := <-errc; err != nil {
			t.Errorf("run: %v", err)
		}
	}
	r.verify()
	total := int64(len(wantKeys(byPart, shareA)) * sharePerKey)
	if a, s := handledByActive.Load(), handledByStandby.Load(); a < stopAfter || s == 0 || a+s < total {
		t.Errorf("active handled %d, standby %d, of %d: want the standby to take over", a, s, total)
	}
	if g, w := keysOf(&gotB), wantKeys(byPart, shareB); !slices.Equal(g, w) {
		t.Errorf("other share received keys %v, want %v", g, w)
	}
	t.Logf("active handled %d, standby %d (share %v)", handledByActive.Load(), handledByStandby.Load(), shareA)
}

// Shares are validated at open, from options and from URLs, before any
// connection is made by a URL.
func TestAssignedValidation(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	name := uniqueName("assignedbad")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, Partitions: shareParts})
	for _, tc := range []struct {
		partitions int
		assigned   []int
	}{
		{4, []int{4}},
		{4, []int{-1}},
		{4, []int{1, 2, 1}},
		{4, []int{}},
		{0, []int{0}},
		{1, []int{0}},
	} {
		tt := top
		tt.Partitions = tc.partitions
		sub, err := rabbit.OpenSubscription(ctx, c, tt, &rabbit.SubscriptionOptions{Assigned: tc.assigned})
		if !errors.Is(err, broker.ErrInvalid) {
			if sub != nil {
				_ = sub.Close()
			}
			t.Errorf("partitions %d assigned %v: %v, want ErrInvalid", tc.partitions, tc.assigned, err)
		}
	}
	// Topology supplies Partitions; Assigned is checked against it.
	o := &rabbit.SubscriptionOptions{NackDelay: true}
	o.Assigned = []int{0, 7}
	if _, err := rabbit.OpenSubscription(ctx, c, top, o); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("assigned partition 7 of a 4-partition topology: %v, want ErrInvalid", err)
	}

	// A server nobody listens on: a URL that passed validation would fail
	// to dial, not with ErrInvalid.
	server := serverURL()
	t.Setenv(rabbit.ServerURLEnv, "amqp://guest:guest@127.0.0.1:1/")
	for _, q := range []string{
		"partitions=4&assigned=4",
		"partitions=4&assigned=1,1",
		"partitions=4&assigned=0-1,1",
		"partitions=4&assigned=",
		"partitions=4&assigned=x",
		"partitions=4&assigned=0,,1",
		"partitions=4&assigned=-1",
		"partitions=4&assigned=3-1",
		"partitions=4&assigned=0-",
		"partitions=4&assigned=0-99999999",
		"assigned=0,1",
	} {
		if _, err := broker.OpenSubscription(ctx, "rabbit://"+top.Queue+"?"+q); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", q, err)
		}
	}

	// A valid share by URL consumes only its partitions.
	t.Setenv(rabbit.ServerURLEnv, server)
	sub, err := broker.OpenSubscription(ctx, "rabbit://"+top.Queue+"?partitions=4&assigned=2-3")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var ch *amqp.Channel
	if !sub.As(&ch) || ch != nil {
		t.Fatal("As(**amqp.Channel): a consumer before receiving started")
	}
	// The consumer registers when receiving starts (nothing to receive).
	rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = sub.Receive(rctx, 1)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("receive from an empty share: %v", err)
	}
	if !sub.As(&ch) || ch == nil {
		t.Fatal("As(**amqp.Channel): no consumer after receiving")
	}
	for p := range shareParts {
		q, err := c.Connection().Channel()
		if err != nil {
			t.Fatal(err)
		}
		st, err := q.QueueDeclarePassive(top.Queue+"."+strconv.Itoa(p), true, false, false, false, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum, amqp.SingleActiveConsumerArg: true})
		_ = q.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if p >= 2 {
			want = 1
		}
		if st.Consumers != want {
			t.Errorf("partition %d has %d consumers, want %d", p, st.Consumers, want)
		}
	}
}

func TestShare(t *testing.T) {
	for _, tc := range []struct {
		partitions, instances, i int
		want                     []int
	}{
		{4, 2, 0, []int{0, 2}},
		{4, 2, 1, []int{1, 3}},
		{5, 2, 0, []int{0, 2, 4}},
		{4, 1, 0, []int{0, 1, 2, 3}},
		{2, 3, 2, []int{}},
		{4, 0, 0, []int{}},
		{4, 2, 2, []int{}},
	} {
		if got := rabbit.Share(tc.partitions, tc.instances, tc.i); !slices.Equal(got, tc.want) || got == nil {
			t.Errorf("Share(%d, %d, %d) = %v, want %v", tc.partitions, tc.instances, tc.i, got, tc.want)
		}
	}
}
