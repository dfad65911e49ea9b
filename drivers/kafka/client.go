package kafka

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// The clients the driver runs on are the program's: it builds them with
// kgo.NewClient (or kgo.NewGroupTransactSession) and closes them after the
// topics, subscriptions and sessions on them. What kgo only accepts when a
// client is built (a consumer group, its rebalance callbacks, the
// transactional ID) comes from TopicOpts, SubscriptionOpts and
// TransactOpts, which the program passes to kgo with its own options
// (seeds, TLS, SASL, ...), placed after the driver's so that they may
// override the defaults:
//
//	cl, err := kgo.NewClient(append(kafka.SubscriptionOpts("billing"), kgo.SeedBrokers(seeds...))...)
//	sub, err := kafka.OpenSubscription(ctx, cl, "orders", "billing", nil)

// TopicOpts returns the kgo options that let the driver size record
// batches per topic (to the topic's max.message.bytes, read at open: kgo
// would fill a batch up to ProducerBatchMaxBytes and the broker refuse it
// whole) and notice at once that the broker rejects the client's SASL
// login (a publish then fails with broker.ErrPermission instead of
// waiting for its context). They are optional for OpenTopic: without
// them, the batch size is the client's kgo.ProducerBatchMaxBytes (a
// message too large for the topic is still refused before it is
// produced), and a publish on a client whose login is rejected ends when
// its context does. SubscriptionOpts includes them.
func TopicOpts() []kgo.Opt {
	return newHooks("TopicOpts", "").opts()
}

// SubscriptionOpts returns the kgo options a client must be built with to
// serve OpenSubscription for the consumer group named group: the group,
// manual commits (kgo.DisableAutoCommit), kgo.BlockRebalanceOnPoll, and
// rebalance callbacks that reach the subscription once it is open. Before
// them come defaults that options after them may override:
// kgo.SessionTimeout(DefaultSessionTimeout),
// kgo.HeartbeatInterval(DefaultHeartbeatInterval), kgo.ConsumeResetOffset
// to the start of the partition (a new group misses nothing), and
// kgo.FetchIsolationLevel(kgo.ReadCommitted()), so that records of aborted
// transactions (see TransactSession) are never delivered. It includes
// TopicOpts (a subscription writes retry and dead-letter copies).
//
// The program's options must not set a consumer group, topics to consume
// (the subscription adds its topic and retry topic when it opens),
// auto-commit, or the OnPartitions callbacks; OpenSubscription checks what
// it can read back (kgo.Client.OptValue) and fails with a *ClientError.
// A client serves one subscription: the group's member is the client.
func SubscriptionOpts(group string) []kgo.Opt {
	h := newHooks("SubscriptionOpts", group)
	return append(groupDefaults(), append(h.opts(),
		kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(h.onAssigned),
		kgo.OnPartitionsRevoked(h.onRevoked),
		kgo.OnPartitionsLost(h.onLost),
		kgo.OnOffsetsFetched(h.onOffsetsFetched),
	)...)
}

// TransactOpts returns the kgo options a kgo.GroupTransactSession must be
// built with (kgo.NewGroupTransactSession) to serve OpenTransactSession
// for the consumer group named group: the group, read_committed fetches
// (an input record of an aborted transaction is never consumed), the
// callbacks that forget the attempt counts of partitions leaving the
// member, and a transactional ID. As for SubscriptionOpts, defaults come
// first (session timeout, heartbeat, reset offset), and so does the
// transactional ID: the group name, "-", and a random suffix, unique, so
// that nothing is fenced on restart (an open transaction of a crashed
// instance is aborted by the broker after the transaction timeout, and its
// input stays locked until then). Give each instance of a pipeline a
// stable one instead, after these options (kgo.TransactionalID("enricher-1")),
// so that a restarted instance fences its predecessor's open transaction
// at once. Two live sessions must never share one.
func TransactOpts(group string) []kgo.Opt {
	h := newHooks("TransactOpts", group)
	return append(groupDefaults(), append(h.opts(),
		kgo.TransactionalID(group+"-"+broker.NewID()),
		kgo.ConsumerGroup(group),
		kgo.OnPartitionsRevoked(h.onRevoked),
		kgo.OnPartitionsLost(h.onLost),
	)...)
}

// ClientError reports a client that was not built as a constructor needs
// (see SubscriptionOpts and TransactOpts). Errors carrying one also match
// broker.ErrInvalid.
type ClientError struct {
	// Func is the constructor, such as "OpenSubscription".
	Func string
	// Problem says what is wrong with the client, and the fix.
	Problem string
}

func (e *ClientError) Error() string { return "kafka: " + e.Func + ": " + e.Problem }

func clientError(fn, format string, args ...any) error {
	return driver.OpenError(driver.Invalid, &ClientError{Func: fn, Problem: fmt.Sprintf(format, args...)})
}

// hooks is the driver's kgo hook on a client built with its options: it
// watches the SASL exchanges (authWatch), holds the batch limits, and, on
// a group client, routes the rebalance callbacks to the subscription or
// session bound to it. OptValue(kgo.WithHooks) finds it again.
type hooks struct {
	authWatch
	lim   batchLimits
	kind  string // the function that made it: TopicOpts, SubscriptionOpts, TransactOpts
	group string // "" for TopicOpts

	mu   sync.Mutex
	used string // the constructor the client serves ("" before)
	sub  *subscription
	tx   *TransactSession
}

func newHooks(kind, group string) *hooks { return &hooks{kind: kind, group: group} }

func (h *hooks) opts() []kgo.Opt {
	return []kgo.Opt{kgo.ProducerBatchMaxBytesFn(h.lim.fn), kgo.WithHooks(h)}
}

// hooksOf returns the driver's hook on cl, or nil.
func hooksOf(cl *kgo.Client) *hooks {
	hs, _ := cl.OptValue(kgo.WithHooks).([]kgo.Hook)
	for _, x := range hs {
		if h, ok := x.(*hooks); ok {
			return h
		}
	}
	return nil
}

// bindGroup checks that cl was built with the options of group's
// constructor fn (SubscriptionOpts or TransactOpts), and binds it to fn.
func bindGroup(cl *kgo.Client, fn, optsFn, group string, bind func(*hooks)) error {
	if cl == nil {
		return clientError(fn, "no client")
	}
	h := hooksOf(cl)
	if h == nil || h.kind != optsFn {
		return clientError(fn, "the client was not built with kafka.%s(%q)", optsFn, group)
	}
	if g, _ := cl.OptValue(kgo.ConsumerGroup).(string); g != group || h.group != group {
		return clientError(fn, "the client was built for the consumer group %q, not %q", g, group)
	}
	if re, _ := cl.OptValue(kgo.ConsumeRegex).(bool); re {
		return clientError(fn, "the client consumes by regex (kgo.ConsumeRegex): the driver chooses the topics")
	}
	if ts, _ := cl.OptValue(kgo.ConsumeTopics).([]string); len(ts) > 0 {
		return clientError(fn, "the client was built with topics to consume (kgo.ConsumeTopics): the driver adds its own when it opens")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.used != "" {
		return clientError(fn, "the client already serves a %s: a group client serves one", h.used)
	}
	h.used = fn
	bind(h)
	return nil
}

// unbind frees h after a failed open, so that the client may serve a
// retry.
func (h *hooks) unbind() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.used, h.sub, h.tx = "", nil, nil
}

func (h *hooks) bound() (*subscription, *TransactSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sub, h.tx
}

func (h *hooks) onAssigned(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	if s, _ := h.bound(); s != nil {
		s.onAssigned(ctx, cl, m)
	}
}

func (h *hooks) onRevoked(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	h.leaving(ctx, cl, m, false)
}

func (h *hooks) onLost(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	h.leaving(ctx, cl, m, true)
}

// leaving hands partitions revoked (or lost) to what the client serves.
func (h *hooks) leaving(ctx context.Context, cl *kgo.Client, m map[string][]int32, lost bool) {
	switch s, tx := h.bound(); {
	case s != nil && lost:
		s.onLost(ctx, cl, m)
	case s != nil:
		s.onRevoked(ctx, cl, m)
	case tx != nil:
		tx.forget(ctx, cl, m)
	}
}

func (h *hooks) onOffsetsFetched(ctx context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	if s, _ := h.bound(); s != nil {
		return s.onOffsetsFetched(ctx, cl, resp)
	}
	return nil
}
