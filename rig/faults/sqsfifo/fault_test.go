package sqsfifo_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
	"github.com/wary-go/wary/rig/effecttest"
)

// proxied starts an in-process toxiproxy in front of the server and returns
// it with a client that goes through it. The client does not retry (the
// SDK's retryer is off): the portable layer's retries are under test.
func proxied(t *testing.T, e *testEnv) (*toxiproxy.Proxy, *sqs.Client) {
	t.Helper()
	u, err := url.Parse(e.srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "sqs", "127.0.0.1:0", u.Host)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	t.Cleanup(p.Stop)
	through := *e.srv
	through.Endpoint = u.Scheme + "://" + p.Listen
	c := through.NewClient(t, func(o *sqs.Options) { o.Retryer = aws.NopRetryer{} })
	return p, c
}

func addResets(t *testing.T, p *toxiproxy.Proxy) {
	t.Helper()
	for _, stream := range []string{"downstream", "upstream"} {
		js := fmt.Sprintf(`{"name":"reset_%s","type":"reset_peer","stream":%q,"attributes":{"timeout":0}}`, stream, stream)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			t.Fatalf("add toxic: %v", err)
		}
	}
}

func removeResets(t *testing.T, p *toxiproxy.Proxy) {
	t.Helper()
	for _, stream := range []string{"downstream", "upstream"} {
		if err := p.Toxics.RemoveToxic(context.Background(), "reset_"+stream); err != nil {
			t.Fatalf("remove toxic: %v", err)
		}
	}
}

// TestConnectionResetMidBatch publishes 40 batches of 10 messages (8
// groups) through toxiproxy while a consumer runs an idem inbox on SQLite,
// and resets every connection (TCP RST on data, both ways) in the middle:
// the batch in flight fails as retryable, publishing it again succeeds
// (SQS drops the copies of what got through), nothing is lost, and each
// message's effect is applied exactly once.
func TestConnectionResetMidBatch(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{})
	if e.srv.Real {
		t.Skip("toxiproxy needs a plain-HTTP endpoint; WARY_SQS_ENDPOINT set")
	}
	proxy, client := proxied(t, e)
	qurl, _ := e.createQueue(t, sqsemu.QueueSpec{Visibility: 5 * time.Second, MaxReceive: 50})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	once := &broker.RetryPolicy{Attempts: 1}
	top, err := sqsfifo.OpenTopic(ctx, client, qurl, &sqsfifo.TopicOptions{TopicOptions: broker.TopicOptions{Retry: once}})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := sqsfifo.OpenSubscription(ctx, client, qurl, &sqsfifo.SubscriptionOptions{WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	h := conformance.NewHistory()
	eff := effecttest.New(t, h)
	handler := eff.Handler(t, "fault", sub.Capabilities())
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	runDone := make(chan error, 1)
	go func() {
		runDone <- sub.Run(runCtx, handler, &broker.RunOptions{Concurrency: 4, PerKey: true, Backoff: broker.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}})
	}()

	const batches, per, groups = 40, 10, 8
	// publish publishes batch b until it succeeds; onFailure, if not nil,
	// runs after its first failure.
	publish := func(b int, onFailure func()) (failures int) {
		msgs := make([]*broker.Message, per)
		ids := make([]string, per)
		for i := range msgs {
			n := b*per + i
			ids[i] = fmt.Sprintf("m-%04d", n)
			msgs[i] = &broker.Message{ID: ids[i], Key: fmt.Sprintf("g%d", n%groups), Body: []byte("effect " + ids[i])}
		}
		for {
			err := top.Publish(ctx, msgs...)
			if err == nil {
				h.Sent(ids...)
				return failures
			}
			failures++
			if onFailure != nil {
				onFailure()
				onFailure = nil
			}
			if !errors.Is(err, broker.ErrRetryable) {
				t.Fatalf("batch %d: %v, want a retryable failure", b, err)
			}
			if errors.Is(err, broker.ErrMaybeSent) {
				h.MaybeSent(ids...)
			}
			if ctx.Err() != nil {
				t.Fatalf("batch %d never published: %v", b, err)
			}
		}
	}
	for b := 0; b < batches/2; b++ {
		publish(b, nil)
	}
	// The fault: every connection reset, the consumer's too, until the
	// next batch has failed once.
	addResets(t, proxy)
	if n := publish(batches/2, func() { removeResets(t, proxy) }); n == 0 {
		t.Fatal("the reset did not fire: the batch in flight did not fail")
	}
	for b := batches/2 + 1; b < batches; b++ {
		publish(b, nil)
	}

	eff.WaitCount(ctx, t, batches*per, runDone)
	stopRun()
	if err := <-runDone; err != nil && runCtx.Err() == nil {
		t.Fatalf("Run: %v", err)
	}
	eff.Applied(t)
	rep := h.Check()
	t.Logf("%s", rep)
	if !rep.Valid() {
		t.Fatalf("history invalid: %s", rep)
	}
}
