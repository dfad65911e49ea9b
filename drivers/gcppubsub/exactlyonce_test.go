package gcppubsub_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/gcppubsub"
)

// refuseAcks is a pstest reactor for Acknowledge that, while armed,
// answers as Pub/Sub does on a subscription with exactly-once delivery
// when it refuses acks: FAILED_PRECONDITION with an ErrorInfo whose
// metadata gives, per ack ID, the reason.
type refuseAcks struct {
	reason atomic.Value // string; "" disarmed
}

func (r *refuseAcks) React(req any) (bool, any, error) {
	reason, _ := r.reason.Load().(string)
	ar, ok := req.(*pubsubpb.AcknowledgeRequest)
	if reason == "" || !ok {
		return false, nil, nil
	}
	md := map[string]string{}
	for _, id := range ar.AckIds {
		md[id] = reason
	}
	st, err := status.New(codes.FailedPrecondition, "Some acknowledgement ids in the request were invalid.").
		WithDetails(&errdetails.ErrorInfo{Reason: "EXACTLY_ONCE_ACKID_FAILURE", Domain: "pubsub.googleapis.com", Metadata: md})
	if err != nil {
		panic(err)
	}
	return true, nil, st.Err()
}

// TestExactlyOnceAckRefused: on a subscription with exactly-once
// delivery, an ack Pub/Sub refuses is not taken for done. A permanent
// refusal (the ack ID expired) is ErrLockLost, Pub/Sub's reason is
// reachable as *gcppubsub.AckError, and the message is delivered again;
// a transient one is ErrRetryable. Once Pub/Sub takes the ack, the
// message is not delivered again.
func TestExactlyOnceAckRefused(t *testing.T) {
	r := &refuseAcks{}
	e := newTestEnv(t, pstest.ServerReactorOption{FuncName: "Acknowledge", Reactor: r})
	c := e.create(t, subSpec{AckDeadline: 2 * time.Second, ExactlyOnce: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	top, sub := e.open(t, c)
	var cfg gcppubsub.Config
	if !sub.As(&cfg) || !cfg.ExactlyOnce {
		t.Fatalf("As(*Config): %+v, want ExactlyOnce", cfg)
	}
	if err := top.Publish(ctx, &broker.Message{ID: "once", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	receive := func() *broker.Delivery {
		t.Helper()
		for {
			ds, err := sub.Receive(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) == 1 {
				return ds[0]
			}
		}
	}

	r.reason.Store("PERMANENT_FAILURE_INVALID_ACK_ID")
	d := receive()
	err := d.Ack(ctx)
	if !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("refused ack: %v, want ErrLockLost", err)
	}
	var ae *gcppubsub.AckError
	if !sub.ErrorAs(err, &ae) || ae.Reason != "PERMANENT_FAILURE_INVALID_ACK_ID" {
		t.Fatalf("ErrorAs(*AckError): %v", ae)
	}
	t.Logf("refused ack: %v", err)

	r.reason.Store("TRANSIENT_FAILURE_UNORDERED_ACK_ID")
	d = receive() // delivered again: the ack did not take
	if d.Message.ID != "once" {
		t.Fatalf("redelivered %q", d.Message.ID)
	}
	if err := d.Ack(ctx); !errors.Is(err, broker.ErrRetryable) && !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("transiently refused ack: %v, want ErrRetryable", err)
	}

	r.reason.Store("")
	d = receive()
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("ack: %v", err)
	}
	qctx, qcancel := context.WithTimeout(ctx, 3*time.Second) // past the ack deadline
	defer qcancel()
	for qctx.Err() == nil {
		ds, err := sub.Receive(qctx, 1)
		if len(ds) > 0 {
			t.Fatalf("acked message delivered again: %q", ds[0].Message.ID)
		}
		if err != nil && qctx.Err() == nil {
			t.Fatal(err)
		}
	}
}
