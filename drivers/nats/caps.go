package nats

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// SizeReserve is what the driver keeps back from the server's and the
// stream's message size limit: the bytes of the NATS header block's
// framing and of Nats-Msg-Id, and of the headers a dead-letter copy
// carries (its reason, the original ID and key), so that every message
// the topic accepts can also be dead-lettered.
const SizeReserve = 2048

// MaxKeyLen is the longest Message.Key, in bytes: the key is a part of the
// subject, which the server bounds (max_control_line).
const MaxKeyLen = 256

// MaxIDLen is the longest Message.ID, in bytes: a dead-letter copy carries
// it in a header, inside SizeReserve.
const MaxIDLen = 256

// MaxBatchSize is the most messages one SendBatch publishes at once
// (asynchronously, then waiting for every PubAck).
const MaxBatchSize = 256

// topicCaps derives what a topic on subject promises from the stream's
// live configuration and the server's max_payload.
func topicCaps(cfg jetstream.StreamConfig, subject string, maxPayload int64) (capability.Topic, error) {
	bare, keyed := captures(cfg, subject), captures(cfg, subject+".k")
	if !bare && !keyed {
		return capability.Topic{}, driver.OpenError(driver.Invalid, fmt.Errorf("nats: stream %q does not capture subject %q nor %q (its subjects: %s)", cfg.Name, subject, subject+".>", strings.Join(streamSubjects(cfg), ", ")))
	}
	c := capability.Topic{
		OrderingKey:  "subject SUBJECT.KEY",
		KeyRequired:  !bare,
		MaxBatchSize: MaxBatchSize,
	}
	if cfg.Duplicates > 0 {
		c.DedupWindow, c.DedupScope = cfg.Duplicates, capability.DedupQueue
	}
	limit := maxPayload
	if cfg.MaxMsgSize > 0 && int64(cfg.MaxMsgSize) < limit {
		limit = int64(cfg.MaxMsgSize)
	}
	c.MaxMessageSize = max(int(limit)-SizeReserve, 1)
	c.Source.Read = fmt.Sprintf("stream %s (subjects, duplicate_window %s, max_msg_size %d) through the JetStream API, and the server's max_payload %d", cfg.Name, cfg.Duplicates, cfg.MaxMsgSize, maxPayload)
	return c, nil
}

// deadLetterTarget is where a subscription's dead letters go: a subject
// of the dead-letter stream.
type deadLetterTarget struct {
	stream, subject string
}

// stated are the values a URL states for a consumer, compared with the
// consumer's configuration (zero: not stated).
type stated struct {
	ackWait       time.Duration
	maxDeliver    int
	maxAckPending int
}

// subCaps derives what a durable pull consumer promises from the live
// configuration of its stream and itself, and whether its dead-letter
// stream exists (dlq nil: it does not).
func subCaps(scfg jetstream.StreamConfig, ccfg jetstream.ConsumerConfig, dlq *deadLetterTarget, st stated) (capability.Subscription, error) {
	switch ccfg.AckPolicy {
	case jetstream.AckExplicitPolicy:
	case jetstream.AckNonePolicy:
		return capability.Subscription{}, driver.OpenError(driver.Invalid, fmt.Errorf("nats: consumer %q acknowledges nothing (ack_policy none): every delivery would be lost on a failure; give it ack_policy explicit", ccfg.Durable))
	default:
		return capability.Subscription{}, driver.OpenError(driver.Invalid, fmt.Errorf("nats: consumer %q has ack_policy %s: an ack would settle every earlier delivery; give it ack_policy explicit", ccfg.Durable, ccfg.AckPolicy))
	}
	c := capability.Subscription{
		AckModel:       capability.AckPerMessage,
		DeliveryCount:  true,
		LockTimeout:    ccfg.AckWait,
		LockExtendable: true,
		NackDelay:      true,
	}
	if ccfg.MaxAckPending == 1 {
		c.Ordering, c.HeadOfLine = capability.OrderQueue, true
	}
	switch md := ccfg.MaxDeliver; {
	case md <= 0:
	case dlq != nil && md >= 2:
		// The MaxDeliver-th delivery is the driver's: it dead-letters it
		// unseen, so that a lock that expires on the last delivery does not
		// leave the message in the stream, never to be delivered again.
		c.DeliveryLimit, c.DeliveryLimitMode = md-1, capability.LimitNative
	default:
		c.DeliveryLimit, c.DeliveryLimitMode = md, capability.LimitNative
	}
	c.DeadLetter = dlq != nil
	c.RedeliveryHorizon = capability.HorizonUnbounded
	if scfg.MaxAge > 0 {
		c.RedeliveryHorizon = scfg.MaxAge
	}
	read := fmt.Sprintf("stream %s (retention %s, max_age %s) and durable pull consumer %s (ack_wait %s, max_deliver %d, max_ack_pending %d) through the JetStream API",
		scfg.Name, scfg.Retention, scfg.MaxAge, ccfg.Durable, ccfg.AckWait, ccfg.MaxDeliver, ccfg.MaxAckPending)
	if dlq != nil {
		read += fmt.Sprintf("; dead-letter stream %s (subject %s)", dlq.stream, dlq.subject)
	} else {
		read += "; no dead-letter stream"
	}
	c.Source.Read = read
	conflict := func(s capability.Setting, param string, statedV, held any) {
		c.Source.Conflicts = append(c.Source.Conflicts, capability.Conflict{
			Setting: s,
			Stated:  fmt.Sprintf("%s=%v in the URL", param, statedV),
			Held:    fmt.Sprintf("%v (consumer %s)", held, ccfg.Durable),
			Fix:     fmt.Sprintf("update the consumer (nats consumer edit %s %s), or drop %s from the URL", scfg.Name, ccfg.Durable, param),
		})
	}
	if st.ackWait > 0 && st.ackWait != ccfg.AckWait {
		conflict(capability.SettingLockTimeout, "ack_wait", st.ackWait, "ack_wait "+ccfg.AckWait.String())
	}
	if st.maxDeliver != 0 && st.maxDeliver != ccfg.MaxDeliver {
		conflict(capability.SettingDeliveryLimit, "max_deliver", st.maxDeliver, fmt.Sprintf("max_deliver %d", ccfg.MaxDeliver))
	}
	if st.maxAckPending != 0 && st.maxAckPending != ccfg.MaxAckPending {
		conflict(capability.SettingOrdering, "max_ack_pending", st.maxAckPending, fmt.Sprintf("max_ack_pending %d", ccfg.MaxAckPending))
	}
	return c, nil
}

// streamSubjects are the subjects a stream captures: its own, or its name
// when it lists none.
func streamSubjects(cfg jetstream.StreamConfig) []string {
	if len(cfg.Subjects) == 0 {
		return []string{cfg.Name}
	}
	return cfg.Subjects
}

// captures reports whether the stream captures subject.
func captures(cfg jetstream.StreamConfig, subject string) bool {
	for _, p := range streamSubjects(cfg) {
		if subjectMatches(p, subject) {
			return true
		}
	}
	return false
}

// subjectMatches reports whether the literal subject matches pattern,
// with NATS's wildcards (* one token, > one or more trailing tokens).
func subjectMatches(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		if p == ">" {
			return len(st) > i
		}
		if i >= len(st) || (p != "*" && p != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}
