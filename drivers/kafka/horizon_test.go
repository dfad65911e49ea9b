package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/kafka"
)

// createTopicConf creates a one-partition topic with the given configs.
func (e *testEnv) createTopicConf(t *testing.T, prefix string, configs map[string]string) string {
	t.Helper()
	name := uniqueName(prefix)
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := e.admin.CreateTopic(ctx, 1, -1, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = e.admin.DeleteTopics(ctx, name)
	})
	return name
}

// TestRedeliveryHorizon: the horizon a topic and its subscriptions report
// follows the topic's configuration: retention.ms plus segment.ms (plus
// the broker's retention check interval), unbounded for retention.ms=-1
// and for compaction without deletion, the larger of the two topics' with
// a retry topic, and unknown where it was not read.
func TestRedeliveryHorizon(t *testing.T) {
	e := newTestEnv(t)
	const (
		day   = 24 * time.Hour
		check = 5 * time.Minute // Kafka's default log.retention.check.interval.ms
	)
	def := e.createTopicConf(t, "h-default", nil)
	hour := e.createTopicConf(t, "h-hour", map[string]string{"retention.ms": "3600000"})
	hourShortSegments := e.createTopicConf(t, "h-hour-seg", map[string]string{"retention.ms": "3600000", "segment.ms": "600000"})
	forever := e.createTopicConf(t, "h-forever", map[string]string{"retention.ms": "-1"})
	compact := e.createTopicConf(t, "h-compact", map[string]string{"cleanup.policy": "compact"})
	compactDelete := e.createTopicConf(t, "h-compact-delete", map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "3600000"})

	for _, c := range []struct {
		name, topic, retry string
		skip               bool
		want               time.Duration
	}{
		{"default", def, "", false, 7*day + 7*day + check},
		{"retention 1h", hour, "", false, time.Hour + 7*day + check},
		{"retention 1h, segments 10m", hourShortSegments, "", false, time.Hour + 10*time.Minute + check},
		{"retention -1", forever, "", false, capability.HorizonUnbounded},
		{"compact", compact, "", false, capability.HorizonUnbounded},
		{"compact,delete", compactDelete, "", false, time.Hour + 7*day + check},
		{"retry topic longer", hourShortSegments, def, false, 7*day + 7*day + check},
		{"retry topic shorter", def, hourShortSegments, false, 7*day + 7*day + check},
		{"retry topic unbounded", hour, forever, false, capability.HorizonUnbounded},
		{"skip check", forever, "", true, capability.HorizonUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			so := &kafka.SubscriptionOptions{RetryTopic: c.retry, SkipCheck: c.skip}
			sub, err := e.openSub(t.Context(), t, c.topic, uniqueName("g"), so)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if got := sub.Capabilities().RedeliveryHorizon; got != c.want {
				t.Errorf("subscription horizon %s, want %s", capability.HorizonString(got), capability.HorizonString(c.want))
			}
			src := sub.Capabilities().Source
			switch {
			case c.skip && (src.Read != "" || !src.IsUnread(capability.SettingRedeliveryHorizon) || !strings.Contains(src.Unread[0].Fix, "without SkipCheck")):
				t.Errorf("skipped check, source %+v", src)
			case !c.skip && (!strings.HasPrefix(src.Read, "topic") || !strings.Contains(src.Read, c.topic) || !strings.Contains(src.Read, c.retry) || len(src.Unread) != 0):
				t.Errorf("source %+v", src)
			}
		})
	}

	// The principal may not read the topic's configs: the open succeeds,
	// and the horizon is unknown rather than guessed.
	t.Run("configs not readable", func(t *testing.T) {
		requireFake(t, e)
		f := e.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeConfigs}, Resource: hour, Err: kerr.TopicAuthorizationFailed, Count: -1})
		defer f.Remove()
		direct, err := e.openSub(t.Context(), t, hour, uniqueName("g"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Close()
		if got := direct.Capabilities().RedeliveryHorizon; got != capability.HorizonUnknown {
			t.Errorf("subscription horizon %s, want unknown", capability.HorizonString(got))
		}
		// It is stated as unread, with how to make it readable.
		src := direct.Capabilities().Source
		if len(src.Unread) != 1 || src.Unread[0].Setting != capability.SettingRedeliveryHorizon ||
			!strings.Contains(src.Unread[0].Why, "may not describe topic "+hour+"'s configs") || !strings.Contains(src.Unread[0].Fix, "DescribeConfigs on topic "+hour) ||
			src.Read != "topic "+hour+"'s partitions (kadm Metadata)" {
			t.Errorf("source %+v", src)
		}
		top, err := kafka.OpenTopic(t.Context(), e.topicClient(t), hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer top.Close()
		if src := top.Capabilities().Source; !src.IsUnread(capability.SettingMaxMessageSize) || !strings.Contains(src.Unread[0].Fix, "DescribeConfigs on topic "+hour) {
			t.Errorf("topic source %+v", src)
		}
		sub, err := e.openSub(t.Context(), t, def, uniqueName("g"), &kafka.SubscriptionOptions{RetryTopic: hour})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if got := sub.Capabilities().RedeliveryHorizon; got != capability.HorizonUnknown {
			t.Errorf("subscription horizon %s, want unknown (its retry topic's is)", capability.HorizonString(got))
		}
		if src := sub.Capabilities().Source; !src.IsUnread(capability.SettingRedeliveryHorizon) || !strings.Contains(src.Read, def) || !strings.Contains(src.Unread[0].Fix, "topic "+hour) {
			t.Errorf("source %+v", src)
		}
		if f.Hits() == 0 {
			t.Fatalf("the DescribeConfigs fault never fired")
		}
	})
}
