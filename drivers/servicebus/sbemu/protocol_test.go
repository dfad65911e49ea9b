package sbemu_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// These tests speak AMQP to the emulator directly (go-amqp, the library under
// the SDK) to pin down wire details the SDK relies on without showing them.

func rawConn(t *testing.T, emu *sbemu.Emulator) *amqp.Session {
	t.Helper()
	if emu.Real {
		t.Skip("raw AMQP tests run against the emulator only (the service needs TLS and a real token)")
	}
	conn, err := amqp.Dial(ctxT(t), "amqp://127.0.0.1:"+strconv.Itoa(emu.Port), &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	sess, err := conn.NewSession(ctxT(t), nil)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return sess
}

// rpc sends one request to node and returns the reply.
func rpc(t *testing.T, sess *amqp.Session, node string, req *amqp.Message) *amqp.Message {
	t.Helper()
	replyTo := node + "-reply-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	recv, err := sess.NewReceiver(ctxT(t), node, &amqp.ReceiverOptions{
		TargetAddress:             replyTo,
		Credit:                    10,
		SettlementMode:            amqp.ReceiverSettleModeFirst.Ptr(),
		RequestedSenderSettleMode: amqp.SenderSettleModeSettled.Ptr(),
	})
	if err != nil {
		t.Fatalf("NewReceiver(%s): %v", node, err)
	}
	defer recv.Close(context.Background())
	snd, err := sess.NewSender(ctxT(t), node, nil)
	if err != nil {
		t.Fatalf("NewSender(%s): %v", node, err)
	}
	defer snd.Close(context.Background())
	if req.Properties == nil {
		req.Properties = &amqp.MessageProperties{}
	}
	req.Properties.MessageID = "req-" + replyTo
	req.Properties.ReplyTo = &replyTo
	if err := snd.Send(ctxT(t), req, nil); err != nil {
		t.Fatalf("Send(%s): %v", node, err)
	}
	res, err := recv.Receive(ctxT(t), nil)
	if err != nil {
		t.Fatalf("Receive(%s): %v", node, err)
	}
	if res.Properties == nil || res.Properties.CorrelationID != req.Properties.MessageID {
		t.Fatalf("reply correlation-id %v, want %v", res.Properties, req.Properties.MessageID)
	}
	return res
}

// $cbs put-token answers with the request's message-id as correlation-id and
// an int32 status-code of 202.
func TestProtocolCBSPutToken(t *testing.T) {
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "q"}}})
	sess := rawConn(t, emu)
	res := rpc(t, sess, "$cbs", &amqp.Message{
		Value: "SharedAccessSignature sr=x&sig=y&se=1&skn=RootManageSharedAccessKey",
		ApplicationProperties: map[string]any{
			"operation": "put-token", "type": "servicebus.windows.net:sastoken",
			"name": "amqp://127.0.0.1/q", "expiration": time.Now().Add(time.Hour),
		},
	})
	if code, ok := res.ApplicationProperties["status-code"].(int32); !ok || code != 202 {
		t.Fatalf("status-code %#v (%T), want int32 202", res.ApplicationProperties["status-code"], res.ApplicationProperties["status-code"])
	}
}

// $cbs answers put-token requests as they come: many in flight at once on
// one link, each answered with its own correlation-id, none waiting for
// the client to read an earlier reply.
func TestProtocolCBSConcurrentPutTokens(t *testing.T) {
	const n = 32
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "q"}}})
	sess := rawConn(t, emu)
	replyTo := "cbs-reply-concurrent"
	recv, err := sess.NewReceiver(ctxT(t), "$cbs", &amqp.ReceiverOptions{
		TargetAddress:             replyTo,
		Credit:                    n,
		SettlementMode:            amqp.ReceiverSettleModeFirst.Ptr(),
		RequestedSenderSettleMode: amqp.SenderSettleModeSettled.Ptr(),
	})
	if err != nil {
		t.Fatalf("NewReceiver: %v", err)
	}
	snd, err := sess.NewSender(ctxT(t), "$cbs", nil)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- snd.Send(ctxT(t), &amqp.Message{
				Value:      "SharedAccessSignature sr=x&sig=y&se=1&skn=RootManageSharedAccessKey",
				Properties: &amqp.MessageProperties{MessageID: "put-" + strconv.Itoa(i), ReplyTo: &replyTo},
				ApplicationProperties: map[string]any{
					"operation": "put-token", "type": "servicebus.windows.net:sastoken",
					"name": "amqp://127.0.0.1/q", "expiration": time.Now().Add(time.Hour),
				},
			}, nil)
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	answered := map[any]bool{}
	for range n {
		res, err := recv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatalf("Receive: %d of %d answered: %v", len(answered), n, err)
		}
		if code, ok := res.ApplicationProperties["status-code"].(int32); !ok || code != 202 {
			t.Fatalf("status-code %#v, want int32 202", res.ApplicationProperties["status-code"])
		}
		answered[res.Properties.CorrelationID] = true
	}
	for i := range n {
		if !answered["put-"+strconv.Itoa(i)] {
			t.Errorf("put-%d not answered (answered %v)", i, answered)
		}
	}
}

// Attach echoes the requested settle modes; go-amqp refuses a link whose
// modes come back different.
func TestProtocolAttachEchoesSettleModes(t *testing.T) {
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "q"}}})
	sess := rawConn(t, emu)
	for _, rcv := range []amqp.ReceiverSettleMode{amqp.ReceiverSettleModeFirst, amqp.ReceiverSettleModeSecond} {
		for _, snd := range []amqp.SenderSettleMode{amqp.SenderSettleModeUnsettled, amqp.SenderSettleModeSettled, amqp.SenderSettleModeMixed} {
			r, err := sess.NewReceiver(ctxT(t), "q", &amqp.ReceiverOptions{SettlementMode: rcv.Ptr(), RequestedSenderSettleMode: snd.Ptr()})
			if err != nil {
				t.Fatalf("receiver rcv=%v snd=%v: %v", rcv, snd, err)
			}
			_ = r.Close(ctxT(t))
			s, err := sess.NewSender(ctxT(t), "q", &amqp.SenderOptions{SettlementMode: snd.Ptr(), RequestedReceiverSettleMode: rcv.Ptr()})
			if err != nil {
				t.Fatalf("sender snd=%v rcv=%v: %v", snd, rcv, err)
			}
			_ = s.Close(ctxT(t))
		}
	}
	// an unknown address: attach with a null terminus, then detach with
	// amqp:not-found
	_, err := sess.NewReceiver(ctxT(t), "nope", nil)
	var amqpErr *amqp.Error
	if !errors.As(err, &amqpErr) || amqpErr.Condition != amqp.ErrCondNotFound {
		t.Fatalf("receiver on a missing entity: %v", err)
	}
}

// The delivery tag is the lock token in .NET GUID byte order; $management
// takes it in RFC 4122 order.
func TestProtocolLockTokenByteOrder(t *testing.T) {
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "q"}}})
	sess := rawConn(t, emu)
	snd, err := sess.NewSender(ctxT(t), "q", nil)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	if err := snd.Send(ctxT(t), amqp.NewMessage([]byte("x")), nil); err != nil {
		t.Fatalf("Send: %v", err)
	}
	recv, err := sess.NewReceiver(ctxT(t), "q", &amqp.ReceiverOptions{SettlementMode: amqp.ReceiverSettleModeSecond.Ptr(), Credit: 1})
	if err != nil {
		t.Fatalf("NewReceiver: %v", err)
	}
	m, err := recv.Receive(ctxT(t), nil)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if len(m.DeliveryTag) != 16 {
		t.Fatalf("delivery tag %x is not 16 bytes", m.DeliveryTag)
	}
	if _, ok := m.Annotations["x-opt-locked-until"].(time.Time); !ok {
		t.Fatalf("x-opt-locked-until: %#v", m.Annotations["x-opt-locked-until"])
	}
	if _, ok := m.Annotations["x-opt-sequence-number"].(int64); !ok {
		t.Fatalf("x-opt-sequence-number: %#v", m.Annotations["x-opt-sequence-number"])
	}
	var asIs, rfc amqp.UUID
	copy(asIs[:], m.DeliveryTag)
	rfc = asIs
	rfc[0], rfc[1], rfc[2], rfc[3] = asIs[3], asIs[2], asIs[1], asIs[0]
	rfc[4], rfc[5] = asIs[5], asIs[4]
	rfc[6], rfc[7] = asIs[7], asIs[6]
	renew := func(token amqp.UUID) int32 {
		res := rpc(t, sess, "q/$management", &amqp.Message{
			ApplicationProperties: map[string]any{"operation": "com.microsoft:renew-lock"},
			Value:                 map[string]any{"lock-tokens": []amqp.UUID{token}},
		})
		code, _ := res.ApplicationProperties["statusCode"].(int32)
		return code
	}
	if code := renew(asIs); code != 410 {
		t.Fatalf("renew with the tag's byte order: status %d, want 410", code)
	}
	if code := renew(rfc); code != 200 {
		t.Fatalf("renew with the RFC byte order: status %d, want 200", code)
	}
	if err := recv.AcceptMessage(ctxT(t), m); err != nil {
		t.Fatalf("AcceptMessage: %v", err)
	}
}
