package rabbit

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker/driver"
)

// The driver's size of a content header is the server's: a frame exactly
// at frame_max passes checkFrame and RabbitMQ accepts it; one byte more
// fails checkFrame. RabbitMQ 3.10 itself only closes the connection when
// the frame's payload, without the frame's own 8 bytes, exceeds frame_max
// (AMQP counts the whole frame, as the driver does): a payload one byte
// over that kills the connection. So the driver's bound is within 8 bytes
// of the server's, and on the safe side.
func TestFrameBoundaryMatchesServer(t *testing.T) {
	url := os.Getenv("WARY_RABBIT_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		if os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
			t.Fatal(err)
		}
		t.Skipf("RabbitMQ unreachable: %v", err)
	}
	defer conn.Close()
	fm := conn.Config.FrameSize
	if fm <= 0 {
		t.Fatalf("frame_max %d", fm)
	}
	// A message on a partitioned topic: ID, one header, the key in wary-key.
	at := func(extra int) amqp.Publishing {
		m := &driver.Message{ID: "edge", Key: "key", Headers: driver.Headers{{"h", ""}}, Body: []byte("b")}
		p := toPublishing(m, true)
		n, ok := contentHeaderSize(&p)
		if !ok {
			t.Fatal("not encodable")
		}
		p.Headers["h"] = strings.Repeat("v", fm-frameOverhead-n+extra)
		return p
	}
	exact, over, fatal := at(0), at(1), at(frameOverhead+1)
	if err := checkFrame(&exact, fm); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	err = checkFrame(&over, fm)
	if err == nil || code(err) != driver.TooLarge || strings.Contains(err.Error(), "vvvv") {
		t.Fatalf("one byte over: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The default exchange with an unknown routing key: dropped once read.
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "wary-test.nowhere", false, false, exact)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("the server did not accept a header at the limit: %v %v", ok, err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	// The server may close the connection on the header frame while the
	// client still writes the body frame: the publish then fails with
	// "channel/connection is not open", and the close carries the reason.
	if err := ch.PublishWithContext(ctx, "", "wary-test.nowhere", false, false, fatal); err != nil && !isClosed(err) {
		t.Fatal(err)
	}
	select {
	case e := <-closed:
		var ae *amqp.Error
		if !errors.As(e, &ae) || ae.Code != amqp.FrameError {
			t.Fatalf("connection closed with %v, want FRAME_ERROR", e)
		}
	case <-ctx.Done():
		t.Fatal("the server accepted a header payload over frame_max")
	}
}

// isClosed reports amqp091's "channel/connection is not open" (504).
func isClosed(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.ChannelError
}
