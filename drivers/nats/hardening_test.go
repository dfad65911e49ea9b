package nats_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/nats"
)

// TestBadInput: what NATS cannot carry unchanged (a message over the
// server's max_payload once its headers are framed, or over the stream's
// max_msg_size; a header name with ':' or whitespace, or one of NATS's
// own; a value with CR or LF or outer whitespace; a key that is not
// subject tokens) fails the publish with a typed error before anything is
// sent, with the rest of its batch; the stream holds nothing of it, and
// the messages published next arrive, each once.
func TestBadInput(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	spec := declare(t, js, nats.Spec{AckWait: 5 * time.Second})
	ctx := ctxT(t)
	top, err := nats.OpenTopic(ctx, js, spec.Stream, &nats.TopicOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	limit := top.Capabilities().MaxMessageSize
	// Within the portable count (names and values), over the server's
	// limit once each header's ": " and CRLF are counted.
	many := broker.Headers{}
	for i := 0; len(many) < 600; i++ {
		many = append(many, [2]string{fmt.Sprintf("h%04d", i), "v"})
	}
	manyBody := limit - len("id-many") - 600*6
	cases := map[string]struct {
		m    *broker.Message
		want error
	}{
		"over max_payload framed":  {&broker.Message{ID: "id-many", Headers: many, Body: make([]byte, manyBody)}, broker.ErrTooLarge},
		"over MaxMessageSize":      {&broker.Message{ID: "id-big", Body: make([]byte, limit+1)}, broker.ErrTooLarge},
		"header name colon":        {&broker.Message{ID: "h1", Headers: broker.Headers{{"a:b", "v"}}}, broker.ErrInvalid},
		"header name space":        {&broker.Message{ID: "h2", Headers: broker.Headers{{"a b", "v"}}}, broker.ErrInvalid},
		"header Nats-":             {&broker.Message{ID: "h3", Headers: broker.Headers{{"Nats-Expected-Stream", "other"}}}, broker.ErrInvalid},
		"header value CRLF":        {&broker.Message{ID: "h4", Headers: broker.Headers{{"a", "x\r\nNats-Msg-Id: y"}}}, broker.ErrInvalid},
		"header value outer space": {&broker.Message{ID: "h5", Headers: broker.Headers{{"a", " x"}}}, broker.ErrInvalid},
		"key empty token":          {&broker.Message{ID: "k1", Key: "a..b"}, broker.ErrInvalid},
		"key wildcard *":           {&broker.Message{ID: "k2", Key: "a.*"}, broker.ErrInvalid},
		"key wildcard >":           {&broker.Message{ID: "k3", Key: ">"}, broker.ErrInvalid},
		"key space":                {&broker.Message{ID: "k4", Key: "a b"}, broker.ErrInvalid},
		"key CRLF injection":       {&broker.Message{ID: "k5", Key: "a\r\nPUB x 1\r\n"}, broker.ErrInvalid},
		"key trailing dot":         {&broker.Message{ID: "k6", Key: "a."}, broker.ErrInvalid},
		"key too long":             {&broker.Message{ID: "k7", Key: strings.Repeat("k", nats.MaxKeyLen+1)}, broker.ErrInvalid},
		"ID too long":              {&broker.Message{ID: strings.Repeat("i", nats.MaxIDLen+1)}, broker.ErrInvalid},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			good := &broker.Message{ID: "good-" + strings.ReplaceAll(name, " ", "-"), Body: []byte("x")}
			err := top.Publish(ctx, good, c.m)
			if !errors.Is(err, c.want) || !errors.Is(err, broker.ErrNotSent) {
				t.Fatalf("%v, want %v and ErrNotSent", err, c.want)
			}
			var be *broker.Error
			if !errors.As(err, &be) || len(be.Messages) != 2 || !errors.Is(be.Messages[1], c.want) {
				t.Fatalf("per-message errors: %+v", be)
			}
		})
	}
	st, err := js.Stream(ctx, spec.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("the stream holds %d messages after only refused publishes (%v)", info.State.Msgs, err)
	}
	// Nothing lost after: dotted keys, unicode, empty values go through.
	next := []*broker.Message{
		{ID: "n1", Key: "region.eu.order-1", Body: []byte("1")},
		{ID: "n2", Key: "grüße", Headers: broker.Headers{{"empty", ""}, {"unicode", "☃"}}, Body: []byte("2")},
		{ID: "n3", Body: []byte{}},
	}
	if err := top.Publish(ctx, next...); err != nil {
		t.Fatal(err)
	}
	sub, err := nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got := map[string]*broker.Message{}
	for len(got) < len(next) {
		ds, err := sub.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if got[d.Message.ID] != nil {
				t.Fatalf("%s twice", d.Message.ID)
			}
			got[d.Message.ID] = d.Message
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, m := range next {
		g := got[m.ID]
		if g.Key != m.Key || string(g.Body) != string(m.Body) || len(g.Headers) != len(m.Headers) {
			t.Errorf("%s: got key %q body %q headers %v", m.ID, g.Key, g.Body, g.Headers)
		}
		for k, v := range m.Headers.All() {
			if g.Headers.Get(k) != v {
				t.Errorf("%s: header %s = %q, want %q", m.ID, k, g.Headers.Get(k), v)
			}
		}
	}
}

// TestStreamMaxMsgSize: a stream's max_msg_size below the server's
// max_payload is the topic's limit, and a message over it is refused
// before it is sent.
func TestStreamMaxMsgSize(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	spec := declare(t, js, nats.Spec{})
	ctx := ctxT(t)
	st, err := js.Stream(ctx, spec.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgSize = 8 << 10
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	top, err := nats.OpenTopic(ctx, js, spec.Stream, &nats.TopicOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	limit := top.Capabilities().MaxMessageSize
	if limit != 8<<10-nats.SizeReserve {
		t.Fatalf("MaxMessageSize %d, want %d", limit, 8<<10-nats.SizeReserve)
	}
	err = top.Publish(ctx, &broker.Message{ID: "big", Body: make([]byte, limit-len("big"))})
	if err != nil {
		t.Fatalf("a message at the limit: %v", err)
	}
	if err := top.Publish(ctx, &broker.Message{ID: "bigger", Body: make([]byte, limit+1)}); !errors.Is(err, broker.ErrTooLarge) {
		t.Fatalf("over the limit: %v, want ErrTooLarge", err)
	}
}
