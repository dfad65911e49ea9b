package servicebus

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// TopicOptions configures OpenTopic. Nil means defaults.
type TopicOptions struct {
	// TopicOptions are the portable options (publish retries, logger).
	broker.TopicOptions
	// Admin, if not nil, reads the queue's or topic's properties when the
	// topic opens (and reports a missing entity as ErrNotFound). Whether a
	// topic's subscriptions require sessions is not the topic's: it comes
	// from Entity.
	Admin *admin.Client
	// Entity declares the entity's properties where Admin cannot read
	// them (all of them without Admin).
	Entity TopicProperties
	// CloseClient: Close also closes the client (the URL opener's topics
	// own theirs).
	CloseClient bool

	via via // how Entity was given (the URL opener's), for the Source
}

// OpenTopic opens a topic that sends to entity, a queue or a topic of the
// client's namespace. Every send waits for the service's acceptance. ctx
// bounds the open's reads through TopicOptions.Admin: the driver sets no
// timeout of its own.
func OpenTopic(ctx context.Context, client *azservicebus.Client, entity string, opts *TopicOptions) (*broker.Topic, error) {
	var o TopicOptions
	if opts != nil {
		o = *opts
	}
	t, err := openTopic(ctx, client, entity, o)
	if err != nil {
		return nil, err
	}
	return broker.NewTopic(t, &o.TopicOptions), nil
}

type topic struct {
	client   *azservicebus.Client
	entity   string
	sender   *azservicebus.Sender
	sessions bool
	caps     capability.Topic
	maxBytes uint64
	ownsCli  bool

	closeOnce sync.Once
}

func openTopic(ctx context.Context, client *azservicebus.Client, entity string, o TopicOptions) (*topic, error) {
	if client == nil {
		return nil, driver.Invalidf("servicebus: nil client")
	}
	if entity == "" {
		return nil, driver.Invalidf("servicebus: empty entity name")
	}
	declared := o.Entity.entity()
	if err := declared.validate(); err != nil {
		return nil, err
	}
	props, read, isQueue := declared, "", true
	if o.Admin != nil {
		got, err := readQueue(ctx, o.Admin, entity)
		read = "queue " + entity
		if errors.Is(err, errNotFound) {
			got, err = readTopic(ctx, o.Admin, entity)
			read, isQueue = "topic "+entity, false
			// a topic's subscriptions carry this
			got.RequiresSession = declared.RequiresSession
		}
		if err != nil {
			return nil, openReadError(err, o.via.adminAt)
		}
		props = got
	}
	props = props.withDefaults()
	caps := props.topicCaps()
	caps.Source = sourceOf(o.via, read, topicSettings(o.via, declared, props, isQueue), "TopicOptions")
	sender, err := client.NewSender(entity, nil)
	if err != nil {
		return nil, driver.OpenError(code(err), err)
	}
	return &topic{
		client:   client,
		entity:   entity,
		sender:   sender,
		sessions: props.RequiresSession,
		caps:     caps,
		maxBytes: uint64(props.MaxMessageSize),
		ownsCli:  o.CloseClient,
	}, nil
}

// SendBatch sends msgs in as few batches as the size limit allows. Each
// batch is accepted or refused as a whole. When the messages fare
// differently (earlier batches accepted, a message too large once
// encoded), a *driver.BatchError says which: nil for an accepted one, the
// failure for those of the failed batch or the refused message, and
// driver.ErrNotAttempted for the rest.
func (t *topic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	errs := make([]error, len(msgs))
	// fail records err for message i and driver.ErrNotAttempted for every
	// message from `from` on that has no outcome yet.
	fail := func(from, i int, err error) error {
		for j := from; j < len(errs); j++ {
			if errs[j] == nil {
				errs[j] = driver.ErrNotAttempted
			}
		}
		if i >= 0 {
			errs[i] = err
		}
		return driver.BatchErrors(errs)
	}
	for i, m := range msgs {
		if err := checkMessage(m, t.sessions); err != nil {
			return fail(0, i, err)
		}
	}
	// one message alone: no batch envelope
	if len(msgs) == 1 {
		return t.sendOne(ctx, msgs[0])
	}
	batch, err := t.sender.NewMessageBatch(ctx, &azservicebus.MessageBatchOptions{MaxBytes: t.maxBytes})
	if err != nil {
		return &sendError{err: err}
	}
	first := 0 // the first message of the batch being filled
	flush := func(end int) error {
		if batch.NumMessages() == 0 {
			return nil
		}
		if err := t.sender.SendMessageBatch(ctx, batch, nil); err != nil {
			se := &sendError{err: err, maybeSent: true}
			for j := first; j < end; j++ {
				errs[j] = se
			}
			return fail(end, -1, nil)
		}
		first = end
		batch, err = t.sender.NewMessageBatch(ctx, &azservicebus.MessageBatchOptions{MaxBytes: t.maxBytes})
		if err != nil {
			return fail(end, end, &sendError{err: err})
		}
		return nil
	}
	for i, m := range msgs {
		err := batch.AddMessage(toSB(m, t.sessions), nil)
		if errors.Is(err, azservicebus.ErrMessageTooLarge) && batch.NumMessages() > 0 {
			if err := flush(i); err != nil {
				return err
			}
			err = batch.AddMessage(toSB(m, t.sessions), nil)
		}
		switch {
		case errors.Is(err, azservicebus.ErrMessageTooLarge):
			return fail(first, i, &sendError{err: errors.Join(errTooLarge, err)})
		case err != nil:
			return fail(first, i, &sendError{err: err})
		}
	}
	return flush(len(msgs))
}

// encodedBound is an upper bound of a message's AMQP encoding: its fields
// plus generous framing (every string with a 5-byte constructor, the
// properties and annotations sections).
func encodedBound(m *driver.Message) uint64 {
	n := len(m.Body) + len(m.ID) + len(m.Key) + 512
	for k, v := range m.Headers.All() {
		n += len(k) + len(v) + 16
	}
	return uint64(n)
}

func (t *topic) sendOne(ctx context.Context, m *driver.Message) error {
	sm := toSB(m, t.sessions)
	if encodedBound(m) <= t.maxBytes {
		if err := t.sender.SendMessage(ctx, sm, nil); err != nil {
			return &sendError{err: err, maybeSent: true}
		}
		return nil
	}
	// near the limit, a batch of one measures the encoded size without
	// sending
	batch, err := t.sender.NewMessageBatch(ctx, &azservicebus.MessageBatchOptions{MaxBytes: t.maxBytes})
	if err != nil {
		return &sendError{err: err}
	}
	if err := batch.AddMessage(sm, nil); err != nil {
		if errors.Is(err, azservicebus.ErrMessageTooLarge) {
			return &sendError{err: errors.Join(errTooLarge, err)}
		}
		return &sendError{err: err}
	}
	if err := t.sender.SendMessage(ctx, sm, nil); err != nil {
		return &sendError{err: err, maybeSent: true}
	}
	return nil
}

func (t *topic) Capabilities() capability.Topic { return t.caps }

func (t *topic) Classify(err error) driver.ErrorInfo { return classify(err) }

// As accepts **azservicebus.Sender and **azservicebus.Client.
func (t *topic) As(i any) bool {
	switch p := i.(type) {
	case **azservicebus.Sender:
		*p = t.sender
		return true
	case **azservicebus.Client:
		*p = t.client
		return true
	}
	return false
}

func (t *topic) ErrorAs(err error, i any) bool { return errorAs(err, i) }

func (t *topic) Close() error {
	var err error
	t.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = t.sender.Close(ctx)
		if t.ownsCli {
			err = errors.Join(err, t.client.Close(ctx))
		}
	})
	return err
}
