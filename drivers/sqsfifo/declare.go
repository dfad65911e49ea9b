package sqsfifo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/broker/topology"
)

// QueueSpec is what CreateQueue declares: a FIFO queue with the
// attributes whose fields are set (zero: SQS's default).
type QueueSpec struct {
	// Visibility is the VisibilityTimeout, in whole seconds (SQS's
	// default 30s).
	Visibility time.Duration
	// MaxReceive > 0 adds a FIFO dead-letter queue and a RedrivePolicy
	// with this maxReceiveCount.
	MaxReceive int
	// DedupScope is "queue" or "messageGroup" (the latter with
	// FifoThroughputLimit perMessageGroupId).
	DedupScope string
	// Retention is the MessageRetentionPeriod, of the dead-letter queue
	// too.
	Retention time.Duration
	// MaxSize is the MaximumMessageSize in bytes.
	MaxSize int
	// ContentDedup turns on ContentBasedDeduplication.
	ContentDedup bool
}

// DeadLetterQueueName is the name CreateQueue and PlanTopologyURL give the
// dead-letter queue of the FIFO queue name: "orders.fifo" has
// "orders-dlq.fifo".
func DeadLetterQueueName(name string) string {
	return strings.TrimSuffix(name, ".fifo") + "-dlq.fifo"
}

// attributes are the queue's attributes spec states (without the
// RedrivePolicy).
func (spec QueueSpec) attributes() map[string]string {
	attrs := map[string]string{string(types.QueueAttributeNameFifoQueue): "true"}
	if spec.ContentDedup {
		attrs[string(types.QueueAttributeNameContentBasedDeduplication)] = "true"
	}
	if spec.DedupScope != "" {
		attrs[string(types.QueueAttributeNameDeduplicationScope)] = spec.DedupScope
		if spec.DedupScope == "messageGroup" {
			attrs[string(types.QueueAttributeNameFifoThroughputLimit)] = "perMessageGroupId"
		}
	}
	if spec.Visibility > 0 {
		attrs[string(types.QueueAttributeNameVisibilityTimeout)] = strconv.Itoa(int(spec.Visibility / time.Second))
	}
	if spec.Retention > 0 {
		attrs[string(types.QueueAttributeNameMessageRetentionPeriod)] = strconv.Itoa(int(spec.Retention / time.Second))
	}
	if spec.MaxSize > 0 {
		attrs[string(types.QueueAttributeNameMaximumMessageSize)] = strconv.Itoa(spec.MaxSize)
	}
	return attrs
}

// CreateQueue creates the FIFO queue name (".fifo" is added when it
// lacks it) as spec says and, with spec.MaxReceive > 0, first its FIFO
// dead-letter queue dlqName (DeadLetterQueueName's when empty) and a
// RedrivePolicy pointing at it. It returns the URLs of both ("" without a
// dead-letter queue); a queue created before an error is not deleted.
// SQS's CreateQueue returns an existing queue whose attributes are equal,
// and fails (QueueNameExists, ErrInvalid) for one whose attributes
// differ. Errors match the classes of package broker.
func CreateQueue(ctx context.Context, client *sqs.Client, name, dlqName string, spec QueueSpec) (queueURL, dlqURL string, err error) {
	if !strings.HasSuffix(name, ".fifo") {
		name += ".fifo"
	}
	if dlqName == "" {
		dlqName = DeadLetterQueueName(name)
	}
	attrs := spec.attributes()
	if spec.MaxReceive > 0 {
		dlqAttrs := map[string]string{string(types.QueueAttributeNameFifoQueue): "true"}
		if r, ok := attrs[string(types.QueueAttributeNameMessageRetentionPeriod)]; ok {
			dlqAttrs[string(types.QueueAttributeNameMessageRetentionPeriod)] = r
		}
		dlq, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(dlqName), Attributes: dlqAttrs})
		if err != nil {
			return "", "", openErr(fmt.Errorf("sqsfifo: create dead-letter queue %q: %w", dlqName, err))
		}
		dlqURL = aws.ToString(dlq.QueueUrl)
		a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			return "", dlqURL, openErr(fmt.Errorf("sqsfifo: dead-letter queue %q's ARN: %w", dlqName, err))
		}
		attrs[string(types.QueueAttributeNameRedrivePolicy)] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`,
			a.Attributes[string(types.QueueAttributeNameQueueArn)], spec.MaxReceive)
	}
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", dlqURL, openErr(fmt.Errorf("sqsfifo: create queue %q: %w", name, err))
	}
	return aws.ToString(out.QueueUrl), dlqURL, nil
}

// declareParams reads the parameters that state how the queue is
// declared (max_receive, visibility); both openers accept them, and a
// subscription compares them with the queue's attributes.
func declareParams(p *driver.URLParams) (maxReceive int, visibility time.Duration) {
	return p.Int("max_receive", 0, 1, 1000), p.Duration("visibility", 0, 0, MaxVisibility)
}

// statedConflicts compares what a URL states (max_receive, visibility;
// zero: not stated) with the capabilities read from the queue's
// attributes.
func statedConflicts(caps capability.Subscription, maxReceive int, visibility time.Duration) []capability.Conflict {
	var cs []capability.Conflict
	if maxReceive > 0 && caps.DeliveryLimit != maxReceive {
		held := "no RedrivePolicy"
		if caps.DeliveryLimit > 0 {
			held = fmt.Sprintf("RedrivePolicy maxReceiveCount %d", caps.DeliveryLimit)
		}
		cs = append(cs, capability.Conflict{Setting: capability.SettingDeliveryLimit, Stated: fmt.Sprintf("max_receive=%d in the URL", maxReceive), Held: held,
			Fix: "drop max_receive from the URL, or change the queue's RedrivePolicy"})
	}
	if visibility > 0 && caps.LockTimeout != visibility.Truncate(time.Second) {
		held := "VisibilityTimeout " + caps.LockTimeout.String()
		if caps.LockTimeout == capability.LockNone {
			held = "VisibilityTimeout 0 (no lock)"
		}
		cs = append(cs, capability.Conflict{Setting: capability.SettingLockTimeout, Stated: "visibility=" + visibility.String() + " in the URL",
			Held: held, Fix: "drop visibility from the URL, or change the queue's VisibilityTimeout"})
	}
	return cs
}

// PlanTopologyURL plans (topology.PlanURL) the FIFO queue that
// sqsfifo://NAME.fifo?PARAMS names: with max_receive=N, also its FIFO
// dead-letter queue NAME-dlq.fifo and a RedrivePolicy after N receives;
// visibility=D sets its VisibilityTimeout (whole seconds). The other
// parameters are the openers'. An existing queue's attributes are read
// (GetQueueAttributes) and compared with the URL's; Apply creates the
// missing queues with CreateQueue and changes no existing one (a missing
// dead-letter queue of an existing queue is created, its RedrivePolicy
// left as it is).
func (o *URLOpener) PlanTopologyURL(ctx context.Context, u *url.URL) (*topology.Plan, error) {
	p := driver.NewURLParams(u)
	name, region, endpoint, err := target(u, p)
	if err != nil {
		return nil, err
	}
	p.Duration("dedup_window", 0, 0, 24*time.Hour)
	p.Duration("wait_time", 0, 0, 20*time.Second)
	p.Bool("dead_letters", false)
	maxReceive, visibility := declareParams(p)
	if err := p.Done(); err != nil {
		return nil, err
	}
	if isURL(name) || !strings.HasSuffix(name, ".fifo") {
		return nil, driver.Invalidf("sqsfifo: %q is not a FIFO queue's name (NAME.fifo)", name)
	}
	c, err := o.newClient(ctx, region, endpoint)
	if err != nil {
		return nil, err
	}
	spec := QueueSpec{Visibility: visibility, MaxReceive: maxReceive}
	var entities []topology.Entity
	dlqName := DeadLetterQueueName(name)
	if maxReceive > 0 {
		dlq := topology.Entity{Kind: "dead-letter queue", Name: dlqName, Settings: []string{"FifoQueue true"}}
		if _, err := lookup(ctx, c, dlqName); err == nil {
			dlq.Exists = true
		} else if !errors.Is(err, broker.ErrNotFound) {
			return nil, err
		}
		entities = append(entities, dlq)
	}
	q := topology.Entity{Kind: "FIFO queue", Name: name, Settings: []string{"FifoQueue true"}}
	if visibility > 0 {
		q.Settings = append(q.Settings, "VisibilityTimeout "+strconv.Itoa(int(visibility/time.Second)))
	}
	if maxReceive > 0 {
		q.Settings = append(q.Settings, fmt.Sprintf("RedrivePolicy maxReceiveCount %d to %s", maxReceive, dlqName))
	}
	if qu, err := openQueue(ctx, c, name, 0); err == nil {
		q.Exists = true
		for _, cf := range statedConflicts(qu.sub, maxReceive, visibility) {
			cf.Fix = ""
			q.Conflicts = append(q.Conflicts, cf)
		}
		if maxReceive > 0 && qu.dlqURL != "" && queueName(qu.dlqURL) != dlqName {
			q.Conflicts = append(q.Conflicts, capability.Conflict{Setting: capability.SettingDeadLetter, Stated: dlqName, Held: "RedrivePolicy to " + queueName(qu.dlqURL)})
		}
	} else if !errors.Is(err, broker.ErrNotFound) {
		return nil, err
	}
	entities = append(entities, q)
	apply := func(ctx context.Context, missing []topology.Entity) error {
		for _, e := range missing {
			if e.Name == name {
				_, _, err := CreateQueue(ctx, c, name, dlqName, spec)
				return err
			}
		}
		// Only the dead-letter queue is missing: the queue exists.
		_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(dlqName), Attributes: map[string]string{string(types.QueueAttributeNameFifoQueue): "true"}})
		if err != nil {
			return openErr(fmt.Errorf("sqsfifo: create dead-letter queue %q: %w", dlqName, err))
		}
		return nil
	}
	return topology.NewPlan(entities, apply), nil
}

// lookup returns the URL of the queue name (ErrNotFound if none).
func lookup(ctx context.Context, c *sqs.Client, name string) (string, error) {
	return resolve(ctx, c, name)
}
