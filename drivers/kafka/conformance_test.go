package kafka_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/kafka"
)

// conformancePartitions is the partition count of every scenario's topic.
const conformancePartitions = 4

// TestConformance runs the suite in both consumer modes, on topics that
// keep records three days (ordered) and forever (concurrent,
// retention.ms=-1): the declared RedeliveryHorizon must be the longest a
// record can stay, which for a finite retention.ms is retention.ms +
// segment.ms (segments are deleted whole) + the broker's 5-minute
// retention check.
func TestConformance(t *testing.T) {
	for _, mode := range []struct {
		name      string
		ordered   bool
		retention time.Duration // capability.HorizonUnbounded: retention.ms=-1
	}{{"ordered", true, 72 * time.Hour}, {"concurrent", false, capability.HorizonUnbounded}} {
		t.Run(mode.name, func(t *testing.T) {
			e := newTestEnv(t)
			want := mode.retention
			if want != capability.HorizonUnbounded {
				want += conformanceSegment + 5*time.Minute
			}
			conformance.Run(t, e.harness("kafka/"+mode.name, mode.ordered, mode.retention, want))
		})
	}
}

// conformanceSegment is the segment.ms of every conformance topic.
const conformanceSegment = time.Hour

// createRetained creates a topic whose retention.ms says how long it keeps
// records (capability.HorizonUnbounded: -1, forever), with segment.ms
// conformanceSegment.
func (e *testEnv) createRetained(t conformance.T, adm *kadm.Client, partitions int32, prefix string, retention time.Duration) string {
	t.Helper()
	name := uniqueName(prefix)
	ms := "-1"
	if retention != capability.HorizonUnbounded {
		ms = strconv.FormatInt(retention.Milliseconds(), 10)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seg := strconv.FormatInt(conformanceSegment.Milliseconds(), 10)
	resp, err := adm.CreateTopic(ctx, partitions, -1, map[string]*string{"retention.ms": &ms, "segment.ms": &seg}, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, name)
	})
	return name
}

// harness builds fresh topics and groups per scenario. Consumers use the
// oldest-member balancer, so that the first consumer a scenario opens owns
// every partition, as the scenarios that hold a delivery on one consumer
// and watch another expect; competing consumers under kgo's default
// cooperative-sticky balancer are proven by TestRebalanceScale.
//
// conformance.Run calls Setup once with its own t to read the capabilities
// and never closes that fixture's topic, whose client would then outlive
// the suite's goroutine-leak check: the harness releases the first
// fixture when the second Setup call comes.
func (e *testEnv) harness(name string, ordered bool, retention, horizon time.Duration) conformance.Harness {
	var setups int
	var probe []func()
	return conformance.Harness{
		Name:              name,
		Quiet:             time.Second,
		RedeliveryHorizon: horizon,
		Setup: func(ctx context.Context, t conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			setups++
			if setups == 1 {
				t = &releasing{T: t, fns: &probe}
			} else {
				for _, f := range probe {
					f()
				}
				probe = nil
			}
			adm := e.newAdmin(t)
			topic := e.createRetained(t, adm, conformancePartitions, "conf", retention)
			dlq := e.createRetained(t, adm, 1, "conf-dlq", retention)
			group := uniqueName("group")
			so := &kafka.SubscriptionOptions{Ordered: ordered, DeadLetterTopic: dlq, DeliveryLimit: cfg.DeliveryLimit}
			pub, err := kafka.OpenTopic(ctx, e.topicClient(t), topic, nil)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { pub.Close() }) // the topic owns its client
			return &conformance.Fixture{
				Topic: pub,
				Subscribe: func(ctx context.Context) (*broker.Subscription, error) {
					s, err := e.openSub(ctx, t, topic, group, so, kgo.Balancers(&oldestTakesAll{opened: time.Now().UnixNano()}))
					if err != nil {
						return nil, err
					}
					if err := waitJoined(ctx, adm, s, group); err != nil {
						s.Close()
						return nil, err
					}
					return s, nil
				},
				DeadLetters: func(ctx context.Context) (*broker.Subscription, error) {
					return e.openDeadLetters(ctx, t, dlq, group+"-dlq", nil)
				},
			}, nil
		},
		OpenMissingTopic: func(ctx context.Context) (*broker.Topic, error) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
			if err != nil {
				return nil, err
			}
			top, err := kafka.OpenTopic(ctx, cl, uniqueName("missing"), nil)
			if err != nil {
				cl.Close()
			}
			return top, err
		},
		OpenMissingSubscription: func(ctx context.Context) (*broker.Subscription, error) {
			group := uniqueName("group")
			cl, err := kgo.NewClient(append(kafka.SubscriptionOpts(group), e.clientOpts()...)...)
			if err != nil {
				return nil, err
			}
			sub, err := kafka.OpenSubscription(ctx, cl, uniqueName("missing"), group, nil)
			if err != nil {
				cl.Close()
			}
			return sub, err
		},
	}
}

// waitJoined waits until s's member is in the group and the group is
// stable, so that a scenario starts with a settled assignment.
func waitJoined(ctx context.Context, adm *kadm.Client, s *broker.Subscription, group string) error {
	var cl *kgo.Client
	if !s.As(&cl) {
		return fmt.Errorf("As(*kgo.Client) failed")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		member, gen := cl.GroupMetadata()
		if gen > 0 {
			gs, err := adm.DescribeGroups(ctx, group)
			if err == nil {
				if g, ok := gs[group]; ok && g.State == "Stable" {
					for _, m := range g.Members {
						if m.MemberID == member {
							return nil
						}
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("consumer did not join group %s: %w", group, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// oldestTakesAll is a cooperative balancer that gives every partition to
// the member that was opened first; the others stand by. Cooperative, so
// that a member joining does not revoke (and, after RevokeTimeout, take
// back) the partitions of the oldest, which keeps its unsettled deliveries
// (scenario held-without-lock-timeout). It never gives an owned partition
// to another member, as a cooperative balancer must not.
type oldestTakesAll struct{ opened int64 }

func (*oldestTakesAll) ProtocolName() string { return "wary-oldest-takes-all" }
func (*oldestTakesAll) IsCooperative() bool  { return true }
func (b *oldestTakesAll) JoinGroupMetadata(interests []string, _ map[string][]int32, _ int32) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = interests
	m.UserData = binary.BigEndian.AppendUint64(nil, uint64(b.opened))
	return m.AppendTo(nil)
}
func (*oldestTakesAll) ParseSyncAssignment(a []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(a)
}
func (b *oldestTakesAll) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}
func (*oldestTakesAll) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	var oldest *kmsg.JoinGroupResponseMember
	var oldestAt uint64
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		at := uint64(1<<63 - 1)
		if len(meta.UserData) == 8 {
			at = binary.BigEndian.Uint64(meta.UserData)
		}
		if oldest == nil || at < oldestAt || at == oldestAt && m.MemberID < oldest.MemberID {
			oldest, oldestAt = m, at
		}
	})
	plan := cb.NewPlan()
	for topic, n := range topics {
		for p := range n {
			plan.AddPartition(oldest, topic, p)
		}
	}
	return plan
}

// releasing records the cleanups registered on it, to run them early (once).
type releasing struct {
	conformance.T
	fns *[]func()
}

func (r *releasing) Cleanup(f func()) {
	var once sync.Once
	g := func() { once.Do(f) }
	*r.fns = append([]func(){g}, *r.fns...)
	r.T.Cleanup(g)
}
