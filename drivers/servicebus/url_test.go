package servicebus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// URLs: the entity from the URL, the connection string from the opener (or
// the environment); a malformed value is ErrInvalid naming the parameter,
// and the SAS key appears in no error.
func TestURLOpener(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue(t, sbemu.Entity{Sessions: true, Lock: 5 * 1e9})
	mux := new(broker.URLMux)
	o := &servicebus.URLOpener{ConnectionString: e.emu.ConnectionString, ClientOptions: e.emu.ClientOptions(), AdminOptions: e.emu.AdminClientOptions()}
	mux.RegisterTopic(servicebus.Scheme, o)
	mux.RegisterSubscription(servicebus.Scheme, o)
	ctx := context.Background()
	topic, err := mux.OpenTopic(ctx, "servicebus://"+q)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	if c := topic.Capabilities(); !c.KeyRequired || c.OrderingKey != "SessionId" {
		t.Fatalf("capabilities read through the URL: %s", c)
	}
	sub, err := mux.OpenSubscription(ctx, "servicebus://"+q+"?max_sessions=2&session_idle=200ms")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := topic.Publish(ctx, &broker.Message{Key: "k", Body: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Receive(ctx, 1)
	if err != nil || len(ds) != 1 || ds[0].Message.Key != "k" {
		t.Fatalf("receive: %v %v", ds, err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"servicebus://" + q + "?max_sessions=many",
		"servicebus://" + q + "?nope=1",
		"servicebus://user:SharedAccessKey=secret@" + q,
	} {
		_, err := mux.OpenSubscription(ctx, u)
		if !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", u, err)
		}
		if err != nil && (strings.Contains(err.Error(), "many") || strings.Contains(err.Error(), "secret")) {
			t.Errorf("%s: the error echoes the value: %v", u, err)
		}
	}
	bad := &servicebus.URLOpener{ConnectionString: "Endpoint=nonsense;SharedAccessKey=hushhush"}
	mux.RegisterTopic("sbbad", bad)
	if _, err := mux.OpenTopic(ctx, "sbbad://x"); err == nil || strings.Contains(err.Error(), "hushhush") {
		t.Fatalf("bad connection string: %v", err)
	}
	for _, s := range []string{fmt.Sprint(bad), fmt.Sprintf("%v %+v %#v %s", *bad, *bad, *bad, *bad)} {
		if strings.Contains(s, "hushhush") || !strings.Contains(s, "Endpoint=nonsense") {
			t.Errorf("the opener prints as %q: want its endpoint and not its key", s)
		}
	}
}
