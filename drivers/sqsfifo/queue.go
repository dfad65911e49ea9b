package sqsfifo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// Limits of SQS that no queue attribute reports.
const (
	// DefaultDedupWindow is SQS's deduplication interval, fixed by AWS.
	DefaultDedupWindow = 5 * time.Minute
	// MaxBatchSize is the most entries of one SendMessageBatch,
	// DeleteMessageBatch or ReceiveMessage.
	MaxBatchSize = 10
	// MaxVisibility is the longest visibility timeout (12 hours).
	MaxVisibility = 12 * time.Hour
	// attrReserve is what the declared MaxMessageSize keeps free, below
	// the queue's MaximumMessageSize, for the attributes the driver adds
	// (their names, types and the JSON framing of the headers).
	attrReserve = 256
)

// queue is an opened queue: its URL and what its attributes promise.
type queue struct {
	client  *sqs.Client
	url     string
	maxSize int // the queue's MaximumMessageSize
	// The queue's attributes give both halves: what it promises a
	// producer (topic) and a consumer (sub).
	topic  capability.Topic
	sub    capability.Subscription
	dlqURL string // from the RedrivePolicy; "" without one
}

// isURL reports whether s is a queue URL rather than a name.
func isURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// resolve returns the URL of queueURLOrName.
func resolve(ctx context.Context, c *sqs.Client, q string) (string, error) {
	if q == "" {
		return "", driver.OpenError(driver.Invalid, errors.New("sqsfifo: empty queue name"))
	}
	if isURL(q) {
		return q, nil
	}
	if !strings.HasSuffix(q, ".fifo") {
		return "", driver.OpenError(driver.Invalid, fmt.Errorf("sqsfifo: queue %q is not a FIFO queue (FIFO queue names end in .fifo)", q))
	}
	out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)})
	if err != nil {
		return "", openErr(fmt.Errorf("sqsfifo: queue %q: %w", q, err))
	}
	return aws.ToString(out.QueueUrl), nil
}

func openErr(err error) error { return driver.OpenError(classify(err).Code, err) }

// openQueue resolves the queue, reads its attributes and derives the
// capabilities. A queue that is not FIFO is refused (ErrInvalid).
func openQueue(ctx context.Context, c *sqs.Client, q string, dedupWindow time.Duration) (*queue, error) {
	if c == nil {
		return nil, driver.OpenError(driver.Invalid, errors.New("sqsfifo: nil *sqs.Client"))
	}
	url, err := resolve(ctx, c, q)
	if err != nil {
		return nil, err
	}
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		if classify(err).Code == driver.PermissionDenied {
			// Without the attributes the driver knows neither the
			// queue's limits nor its dead-letter queue: it does not
			// guess them.
			return nil, openErr(fmt.Errorf("sqsfifo: queue %q: reading its attributes needs the permission sqs:GetQueueAttributes: %w", q, err))
		}
		return nil, openErr(fmt.Errorf("sqsfifo: queue %q: %w", q, err))
	}
	a := out.Attributes
	if a[string(types.QueueAttributeNameFifoQueue)] != "true" {
		return nil, driver.OpenError(driver.Invalid, fmt.Errorf("sqsfifo: queue %q is a standard queue; this driver serves FIFO queues only", q))
	}
	qu := &queue{client: c, url: url}
	qu.topic, qu.sub, qu.maxSize, err = capsFromAttributes(a, dedupWindow)
	if err != nil {
		return nil, driver.OpenError(driver.Invalid, fmt.Errorf("sqsfifo: queue %q: %w", q, err))
	}
	read := fmt.Sprintf("FIFO queue %s's attributes (GetQueueAttributes)", queueName(url))
	qu.sub.Source.Read = read
	qu.topic.Source.Read = read
	qu.topic.DedupWindow, qu.topic.Source = dedupSource(onAWS(c), dedupWindow, qu.topic.Source)
	if arn := redriveTarget(a); arn != "" {
		if qu.dlqURL, err = urlOfARN(ctx, c, arn); err != nil {
			return nil, openErr(fmt.Errorf("sqsfifo: queue %q: its dead-letter queue: %w", q, err))
		}
	}
	return qu, nil
}

type redrivePolicy struct {
	DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	MaxReceiveCount     any    `json:"maxReceiveCount"` // a number or a string
}

func parseRedrive(a map[string]string) (redrivePolicy, bool) {
	var rp redrivePolicy
	s := a[string(types.QueueAttributeNameRedrivePolicy)]
	if s == "" || json.Unmarshal([]byte(s), &rp) != nil || rp.DeadLetterTargetArn == "" {
		return rp, false
	}
	return rp, true
}

func redriveTarget(a map[string]string) string {
	rp, ok := parseRedrive(a)
	if !ok {
		return ""
	}
	return rp.DeadLetterTargetArn
}

// urlOfARN finds the URL of the queue arn:aws:sqs:REGION:ACCOUNT:NAME.
func urlOfARN(ctx context.Context, c *sqs.Client, arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) < 6 {
		return "", invalidErr(fmt.Errorf("malformed queue ARN %q", arn))
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(parts[len(parts)-1])}
	if acct := parts[4]; acct != "" {
		in.QueueOwnerAWSAccountId = aws.String(acct)
	}
	out, err := c.GetQueueUrl(ctx, in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.QueueUrl), nil
}

// attrInt reads the integer attribute name; ok is false when the queue's
// attributes do not hold it.
func attrInt(a map[string]string, name types.QueueAttributeName) (n int, ok bool, err error) {
	s, ok := a[string(name)]
	if !ok || s == "" {
		return 0, false, nil
	}
	n, err = strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("attribute %s is not a non-negative integer", name)
	}
	return n, true, nil
}

// Defaults for attributes a queue's GetQueueAttributes answer lacks (an
// emulator's may): SQS's own defaults, which the capabilities hold but
// list in Source.Unread, not as the queue's.
const (
	defaultVisibility = 30     // seconds
	defaultMaxSize    = 262144 // bytes
)

// capsFromAttributes derives both halves of the capabilities from a FIFO
// queue's attributes (GetQueueAttributes "All"), and its
// MaximumMessageSize. An attribute the answer lacks is listed in the
// Source.Unread of its side (Source.Read is the caller's).
func capsFromAttributes(a map[string]string, dedupWindow time.Duration) (capability.Topic, capability.Subscription, int, error) {
	var none capability.Subscription
	var topicUnread, subUnread []capability.Unread
	attr := func(name types.QueueAttributeName, setting capability.Setting, def int, unread *[]capability.Unread) (int, error) {
		n, ok, err := attrInt(a, name)
		if err != nil || ok {
			return n, err
		}
		held := "none declared"
		if def > 0 {
			held = fmt.Sprintf("SQS's default %d is declared", def)
		}
		*unread = append(*unread, capability.Unread{Setting: setting,
			Why: fmt.Sprintf("the queue's attributes (GetQueueAttributes All) hold no %s; %s", name, held),
			Fix: fmt.Sprintf("use an SQS endpoint that returns %s (AWS's does)", name)})
		return def, nil
	}
	vis, err := attr(types.QueueAttributeNameVisibilityTimeout, capability.SettingLockTimeout, defaultVisibility, &subUnread)
	if err != nil {
		return capability.Topic{}, none, 0, err
	}
	maxSize, err := attr(types.QueueAttributeNameMaximumMessageSize, capability.SettingMaxMessageSize, defaultMaxSize, &topicUnread)
	if err != nil {
		return capability.Topic{}, none, 0, err
	}
	retention, err := attr(types.QueueAttributeNameMessageRetentionPeriod, capability.SettingRedeliveryHorizon, 0, &subUnread)
	if err != nil {
		return capability.Topic{}, none, 0, err
	}
	if dedupWindow <= 0 {
		dedupWindow = DefaultDedupWindow
	}
	scope := a[string(types.QueueAttributeNameDeduplicationScope)]
	if scope == "" {
		// SQS's default scope, the queue, is declared, but not as read.
		topicUnread = append(topicUnread, capability.Unread{Setting: capability.SettingDedupWindow,
			Why: "the queue's attributes (GetQueueAttributes All) hold no DeduplicationScope; SQS's default scope, the queue, is declared",
			Fix: "use an SQS endpoint that returns DeduplicationScope (AWS's does)"})
	}
	tc := capability.Topic{
		OrderingKey:    "MessageGroupId",
		KeyRequired:    true,
		DedupWindow:    dedupWindow,
		DedupScope:     capability.DedupQueue,
		MaxMessageSize: max(maxSize-attrReserve, 1),
		MaxBatchSize:   MaxBatchSize,
		Source:         capability.Source{Unread: topicUnread},
	}
	if scope == "messageGroup" {
		tc.DedupScope = capability.DedupMessageGroup
	}
	caps := capability.Subscription{
		Ordering: capability.OrderMessageGroup,
		// A group's next message is not delivered while an earlier one
		// is in flight (received, not deleted, visibility not expired).
		HeadOfLine: true,
		AckModel:   capability.AckPerMessage,
		// ApproximateReceiveCount: SQS's own count (approximate only in
		// that it counts receives the client may not have seen).
		DeliveryCount:  true,
		DeadLetter:     false,
		LockTimeout:    time.Duration(vis) * time.Second,
		LockExtendable: true,
		NackDelay:      true,
		// A copy can arrive as long as SQS keeps the message: until the
		// retention period after it was sent (unknown when unread).
		RedeliveryHorizon: time.Duration(retention) * time.Second,
		Source:            capability.Source{Unread: subUnread},
	}
	if vis == 0 {
		// Visibility 0: a received message is visible again at once, so
		// it is not locked, and ChangeMessageVisibility finds it no longer
		// in flight: nothing to extend.
		caps.LockTimeout, caps.LockExtendable = capability.LockNone, false
	}
	if rp, ok := parseRedrive(a); ok {
		n, err := strconv.Atoi(strings.TrimSpace(fmt.Sprint(rp.MaxReceiveCount)))
		if err != nil || n < 1 {
			return capability.Topic{}, none, 0, errors.New("RedrivePolicy has no valid maxReceiveCount")
		}
		caps.DeliveryLimit = n
		caps.DeliveryLimitMode = capability.LimitNative
		caps.DeadLetter = true
	}
	return tc, caps, maxSize, nil
}
