package rabbit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/broker/topology"
)

// Parameters that only a subscription URL takes: a rabbit:// URL with one
// of them names a queue for PlanTopologyURL.
var subscriptionOnly = []string{"exchange", "delivery_limit", "dead_letter_exchange", "dead_letter_queue", "dead_letters_from", "prefetch", "nack_delay", "management", "assigned"}

// PlanTopologyURL plans (topology.PlanURL) the exchange and queues a
// URL describes, as Declare declares them, and changes nothing:
//
//   - amqp://…/VHOST?exchange=E, or rabbit://E (a topic's URL): the
//     exchange E, fanout (direct with partitions > 1).
//   - amqp://…/VHOST?queue=Q&PARAMS, or rabbit://Q?PARAMS with a
//     subscription's parameter (a subscription's URL): the quorum queue Q
//     (Q.0 to Q.N-1 with partitions=N) with a single active consumer and
//     the URL's delivery_limit; with dead_letter_exchange=X, the queue's
//     x-dead-letter-exchange, the fanout exchange X and the queue bound to
//     it (dead_letter_queue, or Q.dlq when X is Q.dlx, as Topology names
//     them); with exchange=E (which OpenSubscriptionURL accepts and
//     ignores), the exchange E too, the queue bound to it.
//
// Each entity is looked up with a passive declaration (on a channel of
// its own); an existing queue's arguments and policies are read through
// the management API, as subscriptions read them (over AMQP when it does
// not answer), and an existing exchange's type too: where they differ
// from the URL's the plan says so. Apply declares, with Declare's code,
// the entities missing and binds their queues, and leaves the existing
// ones as they are. The URL's limit and dead-letter exchange are checked
// as OpenSubscriptionURL checks them (ErrInvalid).
func (o *URLOpener) PlanTopologyURL(ctx context.Context, u *url.URL) (*topology.Plan, error) {
	server, name, p, err := o.target(u, "exchange")
	if err != nil {
		return nil, err
	}
	exchange, queue := name, ""
	if u.Scheme == Scheme {
		if slices.ContainsFunc(subscriptionOnly, func(k string) bool { return u.Query().Has(k) }) {
			exchange, queue = p.Get("exchange"), name
		}
	} else {
		queue = p.Get("queue")
	}
	p.Get("routing_key")
	p.Int("max_message_size", 0, 0, maxURLInt)
	p.Bool("skip_check", false)
	limit := p.Int("delivery_limit", 0, NoDeliveryLimit, maxURLInt)
	partitions := p.Int("partitions", 0, 0, maxURLInt)
	dlx, dlq, from := p.Get("dead_letter_exchange"), p.Get("dead_letter_queue"), p.Get("dead_letters_from")
	management := p.Get("management")
	p.Int("prefetch", 0, 0, 1<<16-1)
	p.Bool("nack_delay", false)
	var assigned []int
	for _, err := range []error{partitionsParam(p, "assigned", &assigned), p.Done()} {
		if err != nil {
			return nil, err
		}
	}
	switch {
	case exchange == "" && queue == "":
		return nil, driver.Invalidf("rabbit: %s names neither an exchange nor a queue to declare", redactU(u))
	case from != "":
		return nil, driver.Invalidf("rabbit: %s names a dead-letter queue (dead_letters_from): plan the topology of the queue it serves", redactU(u))
	}
	top := Topology{Exchange: exchange, Queue: queue, Partitions: partitions, DeliveryLimit: limit,
		DeadLetterExchangeName: dlx, DeadLetterQueueName: dlq}
	if top.deadLetter() && top.DeadLetterQueue() == "" {
		return nil, driver.Invalidf("rabbit: the URL's dead_letter_exchange is not the topology's (the queue's name followed by .dlx): name the dead-letter queue with the URL parameter dead_letter_queue")
	}
	c, err := Dial(ctx, server, o.ConnOptions)
	if err != nil {
		return nil, openErr(err)
	}
	defer c.Close()
	ver := c.version()
	d := top.declaration(ver)
	if queue == "" {
		d.queues = nil
	} else if err := checkLimit("Topology", limit, top.deadLetter(), ver); err != nil {
		return nil, err
	}
	mc, merr := newMgmtClient(management, server)
	if merr != nil {
		return nil, merr
	}
	entities, err := d.plan(ctx, c, mc, limit, ver)
	if err != nil {
		return nil, err
	}
	apply := func(ctx context.Context, missing []topology.Entity) error {
		c, err := Dial(ctx, server, o.ConnOptions)
		if err != nil {
			return openErr(err)
		}
		defer c.Close()
		exists := func(queue bool, name string) bool {
			return !slices.ContainsFunc(missing, func(e topology.Entity) bool { return e.Name == name && isQueueKind(e.Kind) == queue })
		}
		if err := c.withChannel(ctx, func(ch *amqp.Channel) error { return d.declare(ch, exists) }); err != nil {
			return openErr(c.scrub(err))
		}
		return nil
	}
	return topology.NewPlan(entities, apply), nil
}

func isQueueKind(k string) bool { return k == kindQueue || k == kindDLQ }

const (
	kindExchange = "exchange"
	kindDLX      = "dead-letter exchange"
	kindQueue    = "quorum queue"
	kindDLQ      = "dead-letter queue"
)

// plan looks up each entity of d, in the order declare declares them.
func (d declaration) plan(ctx context.Context, c *Conn, mc *mgmtClient, limit int, v serverVersion) ([]topology.Entity, error) {
	var out []topology.Entity
	add := func(kind, name, exKind string, args amqp.Table, bound string) error {
		e := topology.Entity{Kind: kind, Name: name}
		queue := isQueueKind(kind)
		if queue {
			e.Settings = argsText(args)
		} else {
			e.Settings = []string{"type " + exKind, "durable"}
		}
		if bound != "" {
			e.Settings = append(e.Settings, "bound to exchange "+strconv.Quote(bound))
		}
		err := c.withChannel(ctx, func(ch *amqp.Channel) error {
			if queue {
				_, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
				return err
			}
			return ch.ExchangeDeclarePassive(name, exKind, true, false, false, false, nil)
		})
		var ae *amqp.Error
		switch {
		case errors.As(err, &ae) && ae.Code == amqp.NotFound:
		case err != nil:
			return openErr(c.scrub(err))
		case queue:
			e.Exists = true
			e.Conflicts, e.Unread = queueDifferences(ctx, c, mc, name, args, kind == kindQueue, limit, v)
		default:
			e.Exists = true
			e.Conflicts, e.Unread = exchangeDifferences(ctx, mc, name, exKind)
		}
		out = append(out, e)
		return nil
	}
	var errs []error
	if d.dlx != "" {
		errs = append(errs, add(kindDLX, d.dlx, amqp.ExchangeFanout, nil, ""), add(kindDLQ, d.dlq, "", d.dlqArgs, d.dlx))
	}
	if d.exchange != "" {
		errs = append(errs, add(kindExchange, d.exchange, d.exchangeKind, nil, ""))
	}
	for _, q := range d.queues {
		errs = append(errs, add(kindQueue, q, "", d.queueArgs, d.exchange))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// argsText renders queue arguments for people, sorted by name.
func argsText(args amqp.Table) []string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s %v", k, args[k])
	}
	return out
}

// queueDifferences compares what the broker holds for the existing queue
// name with args (consumer: a consumer's queue, whose single active
// consumer and delivery limit matter; limit: the URL's delivery_limit).
func queueDifferences(ctx context.Context, c *Conn, mc *mgmtClient, name string, args amqp.Table, consumer bool, limit int, v serverVersion) ([]capability.Conflict, string) {
	var h heldQueue
	var err error
	if mc != nil {
		h, err = readMgmt(ctx, mc, name, v)
	}
	if mc == nil || err != nil {
		why := "the management API is not used (management=off)"
		if err != nil {
			why = err.Error()
		}
		held, aerr := readAMQP(ctx, c, name, maps(args))
		if aerr != nil {
			return nil, why + "; AMQP could not show the queue's arguments either (" + c.scrub(aerr).Error() + ")"
		}
		typ, _ := held[amqp.QueueTypeArg].(string)
		if typ == "" {
			typ = amqp.QueueTypeClassic
		}
		h = resolve(name, typ, settingsFromTable(held), nil, v)
		h.why = why + "; read over AMQP, where policies and x-single-active-consumer are not visible"
	}
	var diffs []capability.Conflict
	differ := func(setting capability.Setting, stated, held string) {
		if stated != held {
			diffs = append(diffs, capability.Conflict{Setting: setting, Stated: stated, Held: held})
		}
	}
	differ(capability.SettingKind, amqp.QueueTypeQuorum, h.typ)
	if want, _ := args["x-dead-letter-exchange"].(string); h.dlxRead {
		differ(capability.SettingDeadLetter, orNone(want), orNone(deref(h.dlx)))
	}
	if consumer && h.sac != nil {
		differ(capability.SettingOrdering, "true", strconv.FormatBool(*h.sac))
	}
	if want := effectiveLimit(limit, v); consumer && h.limitRead && want != h.limit {
		diffs = append(diffs, capability.Conflict{Setting: capability.SettingDeliveryLimit, Stated: deliveries(want), Held: deliveries(h.limit) + " (" + h.limitFrom + ")"})
	}
	return diffs, h.why
}

func maps(t amqp.Table) amqp.Table {
	out := amqp.Table{}
	for k, v := range t {
		out[k] = v
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return strconv.Quote(s)
}

// exchangeDifferences compares the existing exchange's type, read through
// the management API, with kind.
func exchangeDifferences(ctx context.Context, mc *mgmtClient, name, kind string) ([]capability.Conflict, string) {
	if mc == nil {
		return nil, "the management API is not used (management=off): AMQP cannot show an exchange's type"
	}
	var x struct {
		Type string `json:"type"`
	}
	found, err := mc.get(ctx, "/api/exchanges/"+url.PathEscape(mc.vhost)+"/"+url.PathEscape(name), &x)
	switch {
	case err != nil:
		return nil, err.Error() + "; AMQP cannot show an exchange's type"
	case !found:
		return nil, fmt.Sprintf("the management API at %s has no exchange %q (another server than the AMQP URL's?)", mc, name)
	case x.Type != kind:
		return []capability.Conflict{{Setting: capability.SettingKind, Stated: kind, Held: x.Type}}, ""
	}
	return nil, ""
}
