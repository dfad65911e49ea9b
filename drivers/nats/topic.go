package nats

import (
	"context"
	"errors"
	"fmt"
	"strings"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// TopicOptions configures OpenTopic. Nil means defaults.
type TopicOptions struct {
	// TopicOptions are the portable options (publish retries, telemetry).
	broker.TopicOptions
	// Subject is the subject the topic publishes to: a message without a
	// key to Subject itself, one with a key to Subject.KEY. Default: the
	// stream's first subject without a trailing ".>" or ".*" (the stream's
	// name when it lists no subject). The stream must capture Subject or
	// Subject.> (KeyRequired when it captures only the latter).
	Subject string
}

// OpenTopic opens a topic that publishes to the JetStream stream named
// stream, on the subject TopicOptions.Subject. It reads the stream's
// configuration and the server's max_payload to build the capabilities: a
// missing stream is ErrNotFound. js is the caller's: closing the topic
// closes nothing of it. ctx bounds the open's requests.
func OpenTopic(ctx context.Context, js jetstream.JetStream, stream string, opts *TopicOptions) (*broker.Topic, error) {
	var o TopicOptions
	if opts != nil {
		o = *opts
	}
	t, err := openTopic(ctx, js, stream, o.Subject)
	if err != nil {
		return nil, err
	}
	return broker.NewTopic(t, &o.TopicOptions), nil
}

func openTopic(ctx context.Context, js jetstream.JetStream, stream, subject string) (*topic, error) {
	if js == nil {
		return nil, driver.OpenError(driver.Invalid, errors.New("nats: nil JetStream"))
	}
	if err := validName("stream", stream); err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, driver.OpenError(classify(err).Code, fmt.Errorf("nats: stream %q: %w", stream, err))
	}
	cfg := st.CachedInfo().Config
	if subject == "" {
		subject = defaultSubject(cfg)
	}
	if err := validSubject(subject); err != nil {
		return nil, err
	}
	caps, err := topicCaps(cfg, subject, js.Conn().MaxPayload())
	if err != nil {
		return nil, err
	}
	return &topic{js: js, stream: stream, subject: subject, cfg: cfg, caps: caps, limit: int64(caps.MaxMessageSize + SizeReserve)}, nil
}

// defaultSubject is the stream's first subject without a trailing
// wildcard token, or its name.
func defaultSubject(cfg jetstream.StreamConfig) string {
	s := streamSubjects(cfg)[0]
	s = strings.TrimSuffix(strings.TrimSuffix(s, ".>"), ".*")
	if s == ">" || s == "*" || strings.ContainsAny(s, "*>") {
		return cfg.Name
	}
	return s
}

type topic struct {
	js      jetstream.JetStream
	stream  string
	subject string
	cfg     jetstream.StreamConfig
	caps    capability.Topic
	own     *natsgo.Conn // the URL opener's connection, closed with the topic
	limit   int64        // the server's and the stream's limit on header and body bytes
}

// SendBatch encodes every message first (nothing is sent if one breaks a
// rule of NATS's), then publishes them all asynchronously, each with
// Nats-Msg-Id and the expected stream, and waits for every PubAck. A
// duplicate's PubAck (inside the stream's duplicate_window) is a success.
func (t *topic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	out := make([]*natsgo.Msg, len(msgs))
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		nm, err := t.encode(m)
		if err != nil {
			for j := range errs {
				errs[j] = driver.ErrNotAttempted
			}
			errs[i] = err
			return driver.BatchErrors(errs)
		}
		out[i] = nm
	}
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(t.stream), jetstream.WithRetryAttempts(0)}
	if len(out) == 1 {
		_, err := t.js.PublishMsg(ctx, out[0], opts...)
		return err
	}
	futures := make([]jetstream.PubAckFuture, len(out))
	for i, nm := range out {
		f, err := t.js.PublishMsgAsync(nm, opts...)
		if err != nil {
			errs[i] = err
			for j := i + 1; j < len(out); j++ {
				errs[j] = driver.ErrNotAttempted
			}
			break
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i] = err
		case <-ctx.Done():
			errs[i] = &awaitingAck{ctx.Err()}
		}
	}
	return driver.BatchErrors(errs)
}

// encode maps m to a NATS message: the subject (with the key), the
// headers (Nats-Msg-Id the ID) and the body, refusing what NATS cannot
// carry unchanged.
func (t *topic) encode(m *driver.Message) (*natsgo.Msg, error) {
	subject := t.subject
	switch {
	case m.Key == "" && t.caps.KeyRequired:
		return nil, invalidErr(fmt.Errorf("message %q has no key, and stream %s captures only %s.>", m.ID, t.stream, t.subject))
	case m.Key != "":
		if err := validKey(m.Key); err != nil {
			return nil, invalidErr(fmt.Errorf("message %q: %w", m.ID, err))
		}
		subject += "." + m.Key
		if !captures(t.cfg, subject) {
			return nil, invalidErr(fmt.Errorf("message %q: stream %s does not capture its subject %s (its subjects: %s)", m.ID, t.stream, subject, strings.Join(streamSubjects(t.cfg), ", ")))
		}
	}
	if len(m.ID) > MaxIDLen {
		return nil, invalidErr(fmt.Errorf("message ID of %d bytes is over the driver's limit of %d", len(m.ID), MaxIDLen))
	}
	if err := validHeaderValue(m.ID); err != nil {
		return nil, invalidErr(fmt.Errorf("message ID %q: %w", m.ID, err))
	}
	h := make(natsgo.Header, len(m.Headers)+1)
	size := int64(len(hdrLine) + 2 + len(natsgo.MsgIdHdr) + len(m.ID) + 4 + len(m.Body))
	for k, v := range m.Headers.All() {
		if err := validHeaderName(k); err != nil {
			return nil, invalidErr(fmt.Errorf("message %q: header %q: %w", m.ID, k, err))
		}
		if err := validHeaderValue(v); err != nil {
			return nil, invalidErr(fmt.Errorf("message %q: header %q: %w", m.ID, k, err))
		}
		h[k] = []string{v}
		size += int64(len(k) + len(v) + 4)
	}
	if size+deadLetterExtra(m.ID, m.Key) > t.limit {
		return nil, tooLargeErr(fmt.Errorf("message %q is %d bytes once encoded (headers and body), over the %d the topic accepts (max_payload or max_msg_size %d, less the driver's reserve)", m.ID, size, t.caps.MaxMessageSize, t.limit))
	}
	h[natsgo.MsgIdHdr] = []string{m.ID}
	return &natsgo.Msg{Subject: subject, Header: h, Data: m.Body}, nil
}

// deadLetterExtra bounds the bytes a dead-letter copy of a message with
// this ID and key adds to it: the headers wary-id, wary-key, wary-consumer,
// wary-stream-seq and the reason (cut to MaxReasonLen).
func deadLetterExtra(id, key string) int64 { return int64(len(id)+len(key)) + 1024 }

// hdrLine is the NATS header block's first line.
const hdrLine = "NATS/1.0\r\n"

func (t *topic) Capabilities() capability.Topic      { return t.caps }
func (t *topic) Classify(err error) driver.ErrorInfo { return classify(err) }
func (t *topic) ErrorAs(err error, i any) bool       { return errorAs(err, i) }

// As accepts *jetstream.JetStream, **natsgo.Conn and *Subject.
func (t *topic) As(i any) bool {
	switch p := i.(type) {
	case *jetstream.JetStream:
		*p = t.js
	case **natsgo.Conn:
		*p = t.js.Conn()
	case *Subject:
		*p = Subject(t.subject)
	default:
		return false
	}
	return true
}

// Subject is an As target: the subject a topic publishes to (without the
// key), or the subject of the messages of a delivery.
type Subject string

// Close closes the connection the URL opener made; a topic of the
// caller's JetStream closes nothing.
func (t *topic) Close() error {
	if t.own != nil {
		t.own.Close()
	}
	return nil
}

// Describe names the stream for telemetry (driver.Describer).
func (t *topic) Describe() (system, destination string) { return "nats", t.stream }
