package rabbit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// queueSettings are the settings of a queue that decide its delivery
// limit, dead letters, order and length, as arguments or as a policy's
// keys (nil: not set).
type queueSettings struct {
	limit    *int64  // x-delivery-limit, delivery-limit: returns counted
	dlx      *string // x-dead-letter-exchange, dead-letter-exchange
	sac      *bool   // x-single-active-consumer (an argument only; never read over AMQP)
	maxLen   *int64  // x-max-length, max-length
	overflow *string // x-overflow, overflow
	// x-consumer-timeout, an argument only here: RabbitMQ before 3.11
	// accepts it and ignores it, and refuses a consumer-timeout policy.
	consumerTimeout *int64
}

// settingsFromJSON reads settings from the management API's arguments
// (prefix "x-") or policy definition (prefix "").
func settingsFromJSON(m map[string]json.RawMessage, prefix string) queueSettings {
	var s queueSettings
	if v, ok := jsonInt(m[prefix+"delivery-limit"]); ok {
		s.limit = &v
	}
	if v, ok := jsonString(m[prefix+"dead-letter-exchange"]); ok {
		s.dlx = &v
	}
	if raw := m[prefix+"single-active-consumer"]; raw != nil {
		var b bool
		if json.Unmarshal(raw, &b) == nil {
			s.sac = &b
		}
	}
	if v, ok := jsonInt(m[prefix+"max-length"]); ok {
		s.maxLen = &v
	}
	if v, ok := jsonString(m[prefix+"overflow"]); ok {
		s.overflow = &v
	}
	if prefix == "x-" {
		if v, ok := jsonInt(m["x-consumer-timeout"]); ok {
			s.consumerTimeout = &v
		}
	}
	return s
}

// settingsFromTable reads settings from queue arguments.
func settingsFromTable(t amqp.Table) queueSettings {
	var s queueSettings
	if v, ok := tableInt(t["x-delivery-limit"]); ok {
		s.limit = &v
	}
	if v, ok := t["x-dead-letter-exchange"].(string); ok {
		s.dlx = &v
	}
	if v, ok := tableInt(t["x-max-length"]); ok {
		s.maxLen = &v
	}
	if v, ok := t["x-overflow"].(string); ok {
		s.overflow = &v
	}
	return s
}

func tableInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

// heldQueue is what the broker holds for one queue, as far as it could
// be read. A setting not read has its why and fix.
type heldQueue struct {
	name, typ string

	limitRead bool
	limit     int    // in deliveries (returns + 1); 0: none
	limitFrom string // where it comes from, for people
	// limitArgOnly: the limit is x-delivery-limit's, read over AMQP, where
	// a delivery-limit policy, which changes it, is not visible.
	limitArgOnly bool

	dlxRead bool
	dlx     *string // nil: no dead-letter exchange
	dlxFrom string

	sac *bool // nil: not read

	consumerTimeout *int64 // x-consumer-timeout, in ms; nil: not declared or not seen

	lenRead  bool
	lenNote  string // a bound that drops or diverts messages, for people
	why, fix string // for the settings not read
}

// resolve is what RabbitMQ applies to a queue of type typ with arguments
// args and effective policy pol (nil: not seen) on server v: the smaller
// of argument and policy for the delivery limit (the larger when either is
// negative, which lifts it), the server's default when neither is set (20
// returns from RabbitMQ 4.0, none before); the argument's dead-letter
// exchange over the policy's; the smaller max-length; the policy's
// overflow over the argument's (RabbitMQ's rabbit_quorum_queue).
func resolve(name, typ string, args queueSettings, pol *queueSettings, v serverVersion) heldQueue {
	h := heldQueue{name: name, typ: typ, sac: args.sac, consumerTimeout: args.consumerTimeout}
	if args.sac == nil && pol != nil {
		f := false // an argument only: absent is off
		h.sac = &f
	}
	// Dead-letter exchange: the argument overrules a policy.
	switch {
	case args.dlx != nil:
		h.dlxRead, h.dlx, h.dlxFrom = true, args.dlx, "x-dead-letter-exchange "+strconv.Quote(*args.dlx)
	case pol != nil && pol.dlx != nil:
		h.dlxRead, h.dlx, h.dlxFrom = true, pol.dlx, "dead-letter-exchange policy "+strconv.Quote(*pol.dlx)
	case pol != nil:
		h.dlxRead, h.dlxFrom = true, "no dead-letter exchange"
	}
	// Delivery limit.
	switch {
	case typ != "" && typ != amqp.QueueTypeQuorum:
		h.limitRead, h.limitFrom = true, "a "+typ+" queue, which has no delivery limit"
	case pol == nil && args.limit != nil && *args.limit >= 0:
		// A policy, unseen here, applies over it when lower, and lifts it
		// when negative: the argument is what the subscription counts
		// with, not a reading of the limit (compare lists it unread).
		h.limitRead, h.limit, h.limitArgOnly = true, int(*args.limit)+1, true
		h.limitFrom = fmt.Sprintf("x-delivery-limit %d", *args.limit)
	case pol == nil:
	default:
		h.limitRead = true
		var r *int64
		switch a, p := args.limit, pol.limit; {
		case a != nil && p != nil:
			m := min(*a, *p)
			if *a < 0 || *p < 0 {
				m = max(*a, *p)
			}
			r = &m
			h.limitFrom = fmt.Sprintf("x-delivery-limit %d and delivery-limit policy %d", *a, *p)
		case a != nil:
			r, h.limitFrom = a, fmt.Sprintf("x-delivery-limit %d", *a)
		case p != nil:
			r, h.limitFrom = p, fmt.Sprintf("delivery-limit policy %d", *p)
		case v.atLeast4():
			d := int64(quorumDefaultLimit)
			r, h.limitFrom = &d, fmt.Sprintf("RabbitMQ %s's default x-delivery-limit %d", v, quorumDefaultLimit)
		default:
			h.limitFrom = "no x-delivery-limit nor delivery-limit policy"
		}
		if r != nil && *r >= 0 {
			h.limit = int(*r) + 1
		}
	}
	// Length: a bound that drops or dead-letters the oldest messages.
	if pol != nil {
		h.lenRead = true
		ml := args.maxLen
		if p := pol.maxLen; p != nil && (ml == nil || *p < *ml) {
			ml = p
		}
		ov := "drop-head"
		if args.overflow != nil {
			ov = *args.overflow
		}
		if pol.overflow != nil {
			ov = *pol.overflow
		}
		if ml != nil && (ov == "drop-head" || ov == "reject-publish-dlx") {
			h.lenNote = fmt.Sprintf("max-length %d with overflow %s: when full, the queue drops (or dead-letters) messages no handler saw", *ml, ov)
		}
	}
	return h
}

// readMgmt reads queue name through the management API.
func readMgmt(ctx context.Context, m *mgmtClient, name string, v serverVersion) (heldQueue, error) {
	q, err := m.queue(ctx, name)
	if err != nil {
		return heldQueue{}, err
	}
	args := settingsFromJSON(q.Arguments, "x-")
	if args.sac == nil {
		// The API shows every argument, and no policy sets this one:
		// absent is off, whether or not the policies can be read.
		f := false
		args.sac = &f
	}
	def, perr := m.effectivePolicy(ctx, q)
	if perr != nil {
		// The arguments alone: what a policy could change stays unread.
		h := resolve(name, q.Type, args, nil, v)
		h.why = perr.Error()
		h.fix = "give the user the policymaker tag, so that policies can be read"
		return h, nil
	}
	pol := settingsFromJSON(def, "")
	return resolve(name, q.Type, args, &pol, v), nil
}

// readAMQP learns the arguments of queue name over AMQP: it redeclares
// the queue (which exists: its passive declaration succeeded) with args,
// on a channel of its own, and each 406 PRECONDITION_FAILED names one
// argument that differs and its current value, which the next attempt
// takes, until the declaration succeeds with the queue's own arguments (a
// redeclaration with equal arguments changes nothing). RabbitMQ compares
// only some arguments (x-delivery-limit, x-dead-letter-exchange,
// x-max-length, x-overflow, x-queue-type among them; not
// x-single-active-consumer on 3.x), and policies are not visible at all.
func readAMQP(ctx context.Context, c *Conn, name string, args amqp.Table) (amqp.Table, error) {
	for range 16 {
		err := c.withChannel(ctx, func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(name, true, false, false, false, args)
			return err
		})
		if err == nil {
			return args, nil
		}
		key, val, ok := parseInequivalent(err, args)
		if !ok {
			return nil, err
		}
		if val == nil {
			delete(args, key)
		} else {
			args[key] = val
		}
	}
	return nil, errors.New("the queue's arguments did not settle")
}

// parseInequivalent reads RabbitMQ's "inequivalent arg 'K' for queue ...:
// received ... but current is V" (V: none, 'X' of the type sent, or the
// value 'X' of type 'T'); val nil: the queue has no such argument.
func parseInequivalent(err error, sent amqp.Table) (key string, val any, ok bool) {
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.PreconditionFailed {
		return "", nil, false
	}
	const pre = "inequivalent arg '"
	r := ae.Reason
	i := strings.Index(r, pre)
	if i < 0 {
		return "", nil, false
	}
	key, _, ok = strings.Cut(r[i+len(pre):], "'")
	j := strings.LastIndex(r, " but current is ")
	if !ok || j < 0 {
		return "", nil, false
	}
	cur := r[j+len(" but current is "):]
	if cur == "none" {
		return key, nil, true
	}
	typ := ""
	switch s := sent[key].(type) {
	case string:
		typ = "longstr"
	case bool:
		typ = "bool"
	default:
		if _, isInt := tableInt(s); isInt {
			typ = "long"
		}
	}
	if rest, found := strings.CutPrefix(cur, "the value '"); found {
		k := strings.LastIndex(rest, "' of type '")
		if k < 0 {
			return "", nil, false
		}
		cur, typ = "'"+rest[:k]+"'", strings.TrimSuffix(rest[k+len("' of type '"):], "'")
	}
	if len(cur) < 2 || cur[0] != '\'' || cur[len(cur)-1] != '\'' {
		return "", nil, false
	}
	cur = cur[1 : len(cur)-1]
	switch typ {
	case "longstr", "shortstr":
		return key, cur, true
	case "bool":
		b, err := strconv.ParseBool(cur)
		return key, b, err == nil
	case "long", "signedint", "short", "byte", "unsignedbyte", "unsignedshort", "unsignedint":
		n, err := strconv.ParseInt(cur, 10, 64)
		return key, n, err == nil
	}
	return "", nil, false
}
