package sqsfifo

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestOpenEndsWithCallersContext: against an endpoint that never answers,
// each constructor waits for as long as the caller's context lets it (the
// driver has no timeout of its own), and returns its error when it ends.
func TestOpenEndsWithCallersContext(t *testing.T) {
	arrived, stop := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select { // never answers
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer srv.Close()
	defer close(stop)
	c := client(srv.URL)
	q := srv.URL + "/000000000000/orders.fifo"
	for _, o := range []struct {
		name string
		open func(ctx context.Context) error
	}{
		{"OpenTopic", func(ctx context.Context) error { _, err := OpenTopic(ctx, c, q, nil); return err }},
		{"OpenSubscription", func(ctx context.Context) error { _, err := OpenSubscription(ctx, c, q, nil); return err }},
		{"OpenDeadLetters", func(ctx context.Context) error { _, err := OpenDeadLetters(ctx, c, q, nil); return err }},
		{"OpenSubscription by name", func(ctx context.Context) error { _, err := OpenSubscription(ctx, c, "orders.fifo", nil); return err }},
	} {
		t.Run(o.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- o.open(ctx) }()
			<-arrived // the open's request is waiting on SQS
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want the caller's context.Canceled", err)
			}
		})
	}
}
