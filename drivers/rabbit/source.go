package rabbit

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker/capability"
)

// read is what a subscription learned from the broker about its queues,
// and the capabilities' Source that says so.
type read struct {
	limitRead bool
	limit     int // in deliveries; 0: none
	dlxRead   bool
	dlx       *string
	noOrder   bool // a queue without a single active consumer
	// orderUnread: whether a queue has a single active consumer could not
	// be read (over AMQP), and none was read without one.
	orderUnread bool
	classic     bool   // a queue other than a quorum queue: no delivery count
	lockNote    string // consumerTimeoutNote of the queues read
	src         capability.Source
}

// readQueues reads what the broker holds for queues: through the
// management API (o.Management, derived from the Conn's URL by default),
// or, when it cannot answer, over AMQP (see readAMQP). It compares the
// result with what o states (the URL's delivery_limit and
// dead_letter_exchange) and fills the Source: what was read and how, the
// settings it could not read, and the conflicts.
func readQueues(ctx context.Context, c *Conn, queues []string, o settings, v serverVersion) (read, error) {
	mc, err := newMgmtClient(o.Management, c.url)
	if err != nil {
		return read{}, err
	}
	var hs []heldQueue
	via, why, fix := "", "", ""
	if mc != nil {
		for _, q := range queues {
			h, err := readMgmt(ctx, mc, q, v)
			if err != nil {
				why = err.Error()
				hs = nil
				break
			}
			hs = append(hs, h)
		}
		if hs != nil {
			via = "through the management API at " + mc.String()
		}
	} else {
		why = "the management API is not used (management=" + ManagementOff + ")"
	}
	if hs == nil {
		if fix == "" {
			fix = "enable the rabbitmq_management plugin (rabbitmq-plugins enable rabbitmq_management), or pass management=http://HOST:PORT in the URL (SubscriptionOptions.Management)"
		}
		for _, q := range queues {
			args, err := readAMQP(ctx, c, q, statedArgs(o, v))
			if err != nil {
				hs = nil
				why += "; AMQP could not show the queue's arguments either (" + c.scrub(err).Error() + ")"
				break
			}
			typ, _ := args[amqp.QueueTypeArg].(string)
			if typ == "" {
				typ = amqp.QueueTypeClassic
			}
			h := resolve(q, typ, settingsFromTable(args), nil, v)
			h.why, h.fix = why+"; policies are visible only there", fix
			hs = append(hs, h)
		}
		if hs != nil {
			via = "over AMQP (a redeclaration with equal arguments; policies not visible)"
		}
	}
	return compare(hs, via, why, fix, o, v), nil
}

// statedArgs are the arguments o states for a queue, the first guess of
// readAMQP.
func statedArgs(o settings, v serverVersion) amqp.Table {
	args := amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum, amqp.SingleActiveConsumerArg: true}
	if lim, ok := (Topology{DeliveryLimit: o.DeliveryLimit}).limitArg(v); ok {
		args["x-delivery-limit"] = int64(lim)
	}
	if o.DeadLetterExchange != "" {
		args["x-dead-letter-exchange"] = o.DeadLetterExchange
	}
	return args
}

// compare folds the queues' held settings (none: nothing could be read,
// for why) into one read, with its Source.
func compare(hs []heldQueue, via, why, fix string, o settings, v serverVersion) read {
	var r read
	unread := func(s capability.Setting, why, fix string) {
		r.src.Unread = append(r.src.Unread, capability.Unread{Setting: s, Why: why, Fix: fix})
	}
	if len(hs) == 0 {
		unread(capability.SettingDeliveryLimit, why, fix)
		unread(capability.SettingDeadLetter, why, fix)
		unread(capability.SettingQueueLength, why, fix)
		unread(capability.SettingOrdering, why, fix)
		r.orderUnread = true
		return r
	}
	h0 := hs[0]
	r.lockNote = consumerTimeoutNote(hs, v)
	var details []string
	// Delivery limit: the same on every queue, or unread.
	same := true
	for _, h := range hs {
		same = same && h.limitRead == h0.limitRead && h.limit == h0.limit && h.limitArgOnly == h0.limitArgOnly
	}
	switch {
	case !same:
		unread(capability.SettingDeliveryLimit, "the partition queues hold different delivery limits ("+list(hs, func(h heldQueue) string { return deliveries(h.limit) })+")", "give every partition queue the same x-delivery-limit or delivery-limit policy")
	case !h0.limitRead:
		unread(capability.SettingDeliveryLimit, h0.why, h0.fix)
	case h0.limitArgOnly:
		// The argument, which the subscription counts with; the limit
		// that applies is unread, so nothing conflicts with it.
		r.limitRead, r.limit = true, h0.limit
		details = append(details, h0.limitFrom)
		unread(capability.SettingDeliveryLimit, h0.limitFrom+" is read over AMQP, but a delivery-limit policy, which AMQP cannot show, applies over it when lower and lifts it when negative; "+h0.why, h0.fix)
	default:
		r.limitRead, r.limit = true, h0.limit
		details = append(details, h0.limitFrom)
		if stated := o.DeliveryLimit; stated != 0 && effectiveLimit(stated, v) != h0.limit {
			r.src.Conflicts = append(r.src.Conflicts, capability.Conflict{
				Setting: capability.SettingDeliveryLimit,
				Stated:  statedLimit(stated),
				Held:    deliveries(h0.limit) + " (" + h0.limitFrom + ")",
				Fix:     fmt.Sprintf("drop delivery_limit from the URL (Topology.DeliveryLimit), which the driver now reads from the broker, or make it %s; to change the queue's limit, set a delivery-limit policy", limitParam(h0.limit)),
			})
		}
	}
	// Dead-letter exchange.
	same = true
	for _, h := range hs {
		same = same && h.dlxRead == h0.dlxRead && str(h.dlx) == str(h0.dlx)
	}
	switch {
	case !same:
		unread(capability.SettingDeadLetter, "the partition queues hold different dead-letter exchanges ("+list(hs, func(h heldQueue) string { return str(h.dlx) })+")", "give every partition queue the same dead-letter exchange")
	case !h0.dlxRead:
		unread(capability.SettingDeadLetter, h0.why, h0.fix)
	default:
		r.dlxRead, r.dlx = true, h0.dlx
		details = append(details, h0.dlxFrom)
		if stated := o.DeadLetterExchange; stated != "" && (h0.dlx == nil || *h0.dlx != stated) {
			fix := "drop dead_letter_exchange from the URL (Topology.DeadLetterExchangeName), which the driver now reads from the broker, or make it " + strconv.Quote(str(h0.dlx))
			if h0.dlx == nil {
				fix = "give the queue a dead-letter exchange (a dead-letter-exchange policy): past its delivery limit RabbitMQ drops a message"
			}
			r.src.Conflicts = append(r.src.Conflicts, capability.Conflict{Setting: capability.SettingDeadLetter,
				Stated: "dead-letter exchange " + strconv.Quote(stated) + " (dead_letter_exchange)", Held: h0.dlxFrom, Fix: fix})
		}
	}
	// Order and type: any queue without a single active consumer, or not
	// a quorum queue, weakens the whole subscription. A queue whose single
	// active consumer could not be read (over AMQP) leaves the order
	// unread, unless another queue has none, which is read.
	sacUnread := false
	for _, h := range hs {
		switch {
		case h.sac == nil:
			sacUnread = true
		case !*h.sac:
			r.noOrder = true
		}
		if h.typ != amqp.QueueTypeQuorum {
			r.classic = true
		}
	}
	switch {
	case r.noOrder:
		details = append(details, "no x-single-active-consumer: consumers receive in parallel")
	case sacUnread:
		r.orderUnread = true
		unread(capability.SettingOrdering, "whether the queue has x-single-active-consumer, without which its consumers receive in parallel, cannot be read over AMQP: "+
			"RabbitMQ does not compare that argument on a redeclaration, so the driver's declaration with it succeeds on a queue without it; "+h0.why, h0.fix)
	}
	// Length.
	switch {
	case !h0.lenRead:
		unread(capability.SettingQueueLength, h0.why, h0.fix)
	default:
		for _, h := range hs {
			if h.lenNote != "" {
				details = append(details, h.name+": "+h.lenNote)
			}
		}
	}
	what := h0.typ + " queue " + h0.name
	if len(hs) > 1 {
		what = fmt.Sprintf("%d %s queues %s..%s", len(hs), h0.typ, h0.name, hs[len(hs)-1].name)
	}
	r.src.Read = what + " " + via
	if len(details) > 0 {
		r.src.Read += " (" + strings.Join(details, "; ") + ")"
	}
	return r
}

func str(s *string) string {
	if s == nil {
		return "none"
	}
	return strconv.Quote(*s)
}

func list(hs []heldQueue, f func(heldQueue) string) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.name + ": " + f(h)
	}
	return strings.Join(parts, ", ")
}

// deliveries renders a limit in deliveries.
func deliveries(n int) string {
	if n <= 0 {
		return "no delivery limit"
	}
	return strconv.Itoa(n) + " deliveries"
}

func statedLimit(n int) string {
	if n == NoDeliveryLimit {
		return "no delivery limit (delivery_limit=-1)"
	}
	return fmt.Sprintf("%d deliveries (delivery_limit=%d)", n, n)
}

func limitParam(n int) string {
	if n <= 0 {
		return "delivery_limit=-1"
	}
	return "delivery_limit=" + strconv.Itoa(n)
}
