package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/servicebus"
)

// peekCounting opens servicebus:// URLs as sbpeeks://, and counts the
// dead-letter queues it opens and those of them peeked at.
type peekCounting struct{ opened, peeked atomic.Int64 }

var (
	sbPeeks        peekCounting
	registerSBPeek sync.Once
)

func (o *peekCounting) real(u *url.URL) string {
	r := *u
	r.Scheme = servicebus.Scheme
	return r.String()
}

func (o *peekCounting) OpenTopicURL(ctx context.Context, u *url.URL) (*broker.Topic, error) {
	return broker.OpenTopic(ctx, o.real(u))
}

func (o *peekCounting) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	return broker.OpenSubscription(ctx, o.real(u))
}

func (o *peekCounting) OpenDeadLettersURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	s, err := broker.OpenDeadLetters(ctx, o.real(u))
	if err != nil {
		return nil, err
	}
	o.opened.Add(1)
	return broker.NewSubscription(&countedPeeks{lyingSub: lyingSub{s: s, caps: s.Capabilities()}, o: o}, nil), nil
}

// countedPeeks peeks through a real dead-letter queue, and counts itself
// once as peeked.
type countedPeeks struct {
	lyingSub
	o    *peekCounting
	once sync.Once
}

func (c *countedPeeks) Peek(ctx context.Context, n int) ([]*driver.Message, error) {
	c.once.Do(func() { c.o.peeked.Add(1) })
	ps, err := c.s.Peek(ctx, n)
	out := make([]*driver.Message, len(ps))
	for i, p := range ps {
		m := p.Message
		out[i] = &driver.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body, Attempt: p.Attempt, PublishTime: p.PublishTime}
	}
	return out, err
}

// TestConsoleDashboardPeeksDeadLettersOnce: on Service Bus (our emulator),
// which shows dead letters by peeking, each load of the dashboard opens
// and peeks at the subscription's dead-letter queue once, and that one
// peek gives both the statement's "now:" line and the per-source count.
func TestConsoleDashboardPeeksDeadLettersOnce(t *testing.T) {
	name := unique("orders")
	_, top, sub := sbQueue(t, name, time.Minute)
	for _, id := range []string{unique("dead"), unique("dead")} {
		publish(t, top, event(id, "order-9", 1))
		if err := receive(t, sub, 1)[0].DeadLetter(t.Context(), "poison: cannot parse"); err != nil {
			t.Fatal(err)
		}
	}
	registerSBPeek.Do(func() {
		broker.DefaultURLMux().RegisterTopic("sbpeeks", &sbPeeks)
		broker.DefaultURLMux().RegisterSubscription("sbpeeks", &sbPeeks)
	})
	_, storeArgs := pgStore(t)
	u := "sbpeeks://" + name
	con := startConsole(t, append([]string{"--broker", u, "--subscription", u, "--consumer", "billing"}, storeArgs...)...)
	for load := range 3 {
		opened, peeked := sbPeeks.opened.Load(), sbPeeks.peeked.Load()
		code, body := get(t, con.base+"/api/", nil)
		if code != http.StatusOK {
			t.Fatalf("GET /api/: %d %s", code, body)
		}
		var j struct {
			Statement struct {
				Reconcile []string `json:"reconciliation"`
			} `json:"statement"`
			DeadLetters []struct {
				Source string `json:"source"`
				Count  int    `json:"count"`
				Error  string `json:"error"`
			} `json:"dead_letters"`
		}
		if err := json.Unmarshal([]byte(body), &j); err != nil {
			t.Fatalf("GET /api/: %v: %s", err, body)
		}
		if len(j.DeadLetters) != 1 || j.DeadLetters[0].Count != 2 || j.DeadLetters[0].Error != "" {
			t.Errorf("load %d: dead letters %+v, want 2 of %s", load, j.DeadLetters, u)
		}
		if !strings.Contains(strings.Join(j.Statement.Reconcile, "\n"), "now: 2 dead letter(s) (wary dlq list)") {
			t.Errorf("load %d: statement's reconciliation %q lacks the 2 dead letters", load, j.Statement.Reconcile)
		}
		if o, p := sbPeeks.opened.Load()-opened, sbPeeks.peeked.Load()-peeked; o != 1 || p != 1 {
			t.Errorf("load %d: the dead-letter queue opened %d time(s), peeked at %d time(s), want once each", load, o, p)
		}
	}
}
