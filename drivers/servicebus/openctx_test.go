package servicebus_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/drivers/servicebus"
)

// TestOpenEndsWithCallersContext: with an administration API that never
// answers, OpenTopic and OpenSubscription wait for the entity's settings
// for as long as the caller's context lets them (the driver has no
// timeout of its own), and return its error when it ends.
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
	const cs = "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=hushhush;UseDevelopmentEmulator=true"
	client, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	ao, closeAdmin, err := servicebus.AdminClientOptions(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdmin()
	ac, err := admin.NewClientFromConnectionString(cs, ao)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		open func(ctx context.Context) error
	}{
		{"OpenTopic", func(ctx context.Context) error {
			_, err := servicebus.OpenTopic(ctx, client, "orders", &servicebus.TopicOptions{Admin: ac})
			return err
		}},
		{"OpenSubscription", func(ctx context.Context) error {
			_, err := servicebus.OpenSubscription(ctx, client, "orders/Subscriptions/billing", &servicebus.SubscriptionOptions{Admin: ac})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- c.open(ctx) }()
			<-arrived // the open's read is waiting on the administration API
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want the caller's context.Canceled", err)
			}
		})
	}
}
