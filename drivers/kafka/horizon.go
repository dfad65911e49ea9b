package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// retentionCheckInterval is Kafka's default log.retention.check.interval.ms:
// the broker deletes expired segments only this often. It is a broker
// setting, which a topic's configs do not show, so the horizon assumes the
// default.
const retentionCheckInterval = 5 * time.Minute

// topicInfo is what the driver reads of a topic at open.
type topicInfo struct {
	name    string
	maxMsg  int           // max.message.bytes
	horizon time.Duration // how long a record can stay readable (see horizonOf)
	// unread says why the topic's configs could not be read; "" when
	// they were.
	unread string
}

// describePath checks that topic (and retryTopic, when set) exist, and
// returns the horizon of the path, the larger of the two topics' horizons
// (HorizonUnknown if either is unknown), and what was read of each.
func describePath(ctx context.Context, cl *kgo.Client, lim *batchLimits, topic, retryTopic string) (time.Duration, []topicInfo, error) {
	ti, err := describeTopic(ctx, cl, lim, topic)
	if err != nil {
		return 0, nil, err
	}
	if retryTopic == "" {
		return ti.horizon, []topicInfo{ti}, nil
	}
	ri, err := describeTopic(ctx, cl, lim, retryTopic)
	if err != nil {
		return 0, nil, err
	}
	return maxHorizon(ti.horizon, ri.horizon), []topicInfo{ti, ri}, nil
}

// maxHorizon is the larger of two horizons, unknown if either is.
func maxHorizon(a, b time.Duration) time.Duration {
	if a == capability.HorizonUnknown || b == capability.HorizonUnknown {
		return capability.HorizonUnknown
	}
	return max(a, b)
}

// describeTopic checks that the topic exists and reads its configs. Where
// the configs may not be read (the principal lacks DescribeConfigs), the
// topic's max.message.bytes is Kafka's default and its horizon unknown.
// The max.message.bytes read is recorded in lim (if not nil), for the
// client's batches to the topic.
func describeTopic(ctx context.Context, cl *kgo.Client, lim *batchLimits, name string) (topicInfo, error) {
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, name)
	if err != nil {
		return topicInfo{}, err
	}
	td, ok := md.Topics[name]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return topicInfo{}, &codedError{code: driver.NotFound, err: fmt.Errorf("kafka: topic %q does not exist", name)}
	}
	if td.Err != nil {
		return topicInfo{}, td.Err
	}
	unread := topicInfo{name: name, maxMsg: 1048588, horizon: capability.HorizonUnknown}
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		if notPermitted(err) {
			unread.unread = fmt.Sprintf("the principal may not describe topic %s's configs (%v)", name, err)
			return unread, nil
		}
		return topicInfo{}, err
	}
	rc, err := rcs.On(name, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		if notPermitted(err) {
			unread.unread = fmt.Sprintf("the principal may not describe topic %s's configs (%v)", name, err)
			return unread, nil
		}
		return topicInfo{}, err
	}
	cfg := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			cfg[c.Key] = *c.Value
		}
	}
	ti := topicInfo{name: name, maxMsg: unread.maxMsg, horizon: horizonOf(cfg)}
	if n, err := strconv.Atoi(cfg["max.message.bytes"]); err == nil && n > 0 {
		ti.maxMsg = n
		lim.set(name, n)
	}
	return ti, nil
}

func notPermitted(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// horizonOf is how long a record of a topic with these configs can stay
// readable, and so be read again by a consumer whose offset is reset (or
// rewound): unbounded when retention.ms is -1 or the cleanup policy
// compacts without deleting (the last record of each key stays for ever);
// otherwise retention.ms plus segment.ms (Kafka deletes whole segments,
// once their newest record is past retention, and a segment stays open up
// to segment.ms) plus the broker's retention check interval. A config that
// is missing or unreadable makes the horizon unknown.
func horizonOf(cfg map[string]string) time.Duration {
	policy := cfg["cleanup.policy"]
	if strings.Contains(policy, "compact") && !strings.Contains(policy, "delete") {
		return capability.HorizonUnbounded
	}
	retention, err := strconv.ParseInt(strings.TrimSpace(cfg["retention.ms"]), 10, 64)
	switch {
	case err != nil:
		return capability.HorizonUnknown
	case retention < 0:
		return capability.HorizonUnbounded
	}
	segment, err := strconv.ParseInt(strings.TrimSpace(cfg["segment.ms"]), 10, 64)
	if err != nil || segment < 0 {
		return capability.HorizonUnknown
	}
	const maxMs = int64(capability.HorizonUnbounded/time.Millisecond) / 4
	if retention > maxMs || segment > maxMs {
		return capability.HorizonUnbounded
	}
	return time.Duration(retention+segment)*time.Millisecond + retentionCheckInterval
}

// batchLimits are the max.message.bytes of the topics a client produces
// to, read at open. kgo fills a record batch up to ProducerBatchMaxBytes
// (1,000,012 by default) whatever the topic's own limit, and the broker
// then refuses the whole batch: records that each fit would fail together.
// Clients built with TopicOpts or SubscriptionOpts take their batch limit
// per topic from here (fn, as kgo.ProducerBatchMaxBytesFn, before the
// caller's options, which may override it). kgo reads it when it first
// produces to a topic, after the open.
type batchLimits struct{ m sync.Map } // topic name → int32

func (l *batchLimits) set(topic string, n int) {
	if l != nil {
		l.m.Store(topic, int32(min(max(n, 512), 1<<30)))
	}
}

func (l *batchLimits) fn(topic string) int32 {
	if v, ok := l.m.Load(topic); ok {
		return v.(int32)
	}
	return 1000012 // kgo's default
}
