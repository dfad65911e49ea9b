package kafka

import (
	"fmt"
	"strings"
	"time"

	"github.com/wary-go/wary/broker/capability"
)

// through names the admin requests the driver reads a topic with.
const through = "(kadm Metadata, DescribeTopicConfigs)"

// grant is the fix for configs the principal may not read.
func grant(names string) string {
	return fmt.Sprintf("grant the client's principal DescribeConfigs on %s (an ACL: kafka-acls --add --allow-principal ... --operation DescribeConfigs --topic ...)", names)
}

// topicSource says what was read of a topic at open.
func topicSource(ti topicInfo) capability.Source {
	if ti.unread == "" {
		return capability.Source{Read: fmt.Sprintf("topic %s's partitions and configs %s", ti.name, through)}
	}
	return capability.Source{
		Read: fmt.Sprintf("topic %s's partitions (kadm Metadata)", ti.name),
		Unread: []capability.Unread{{Setting: capability.SettingMaxMessageSize,
			Why: ti.unread + "; MaxMessageSize is Kafka's default max.message.bytes",
			Fix: grant("topic " + ti.name)}},
	}
}

// skippedTopicSource says that nothing of the topic was read (SkipCheck).
func skippedTopicSource(name string) capability.Source {
	return capability.Source{Unread: []capability.Unread{{Setting: capability.SettingMaxMessageSize,
		Why: fmt.Sprintf("SkipCheck (skip_check in the URL) skips reading topic %s; MaxMessageSize is the producer's batch limit", name),
		Fix: "open without SkipCheck; the principal needs Describe and DescribeConfigs on the topic"}}}
}

// subSource says what was read of a subscription's path (the topic, and
// the retry topic when there is one) at open; horizon is the path's.
// The delivery limit and the dead-letter topic are the driver's, from
// the options, not settings of the broker: they are not unread.
func subSource(o *SubscriptionOptions, path []topicInfo, horizon time.Duration) capability.Source {
	var read, denied, whys []string
	for _, ti := range path {
		if ti.unread == "" {
			read = append(read, ti.name)
		} else {
			denied = append(denied, "topic "+ti.name)
			whys = append(whys, ti.unread)
		}
	}
	var src capability.Source
	switch len(read) {
	case 0:
		src.Read = fmt.Sprintf("topic %s's partitions (kadm Metadata)", path[0].name)
	case 1:
		src.Read = fmt.Sprintf("topic %s's partitions and configs %s", read[0], through)
	default:
		src.Read = fmt.Sprintf("topics %s: partitions and configs %s", strings.Join(read, ", "), through)
	}
	if o.DeadLetterTopic != "" {
		src.Read += fmt.Sprintf("; dead-letter topic %s found", o.DeadLetterTopic)
	}
	if horizon != capability.HorizonUnknown {
		return src
	}
	u := capability.Unread{Setting: capability.SettingRedeliveryHorizon}
	if len(denied) > 0 {
		u.Why, u.Fix = strings.Join(whys, "; "), grant(strings.Join(denied, " and "))
	} else {
		u.Why = fmt.Sprintf("the configs of %s hold no readable retention.ms and segment.ms", strings.Join(read, " and "))
		u.Fix = "set retention.ms and segment.ms on the topic (kafka-configs --alter --add-config)"
	}
	src.Unread = append(src.Unread, u)
	return src
}

// skippedSubSource says that nothing of the path was read (SkipCheck).
func skippedSubSource(topic string, o *SubscriptionOptions) capability.Source {
	const fix = "open without SkipCheck (skip_check in the URL); the principal needs Describe and DescribeConfigs on the topics"
	src := capability.Source{Unread: []capability.Unread{{Setting: capability.SettingRedeliveryHorizon,
		Why: fmt.Sprintf("SkipCheck skips reading topic %s's retention.ms and segment.ms", topic), Fix: fix}}}
	if o.DeadLetterTopic != "" {
		src.Unread = append(src.Unread, capability.Unread{Setting: capability.SettingDeadLetter,
			Why: fmt.Sprintf("SkipCheck skips looking up dead-letter topic %s, which may not exist", o.DeadLetterTopic), Fix: fix})
	}
	return src
}
