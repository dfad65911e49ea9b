package servicebus_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// TestSourceReadFromTheEntity: entities created by hand through the
// administration API, not by the driver, with a MaxDeliveryCount of 7: a
// plain URL reads 7 and says it read the entity; a URL stating
// max_delivery_count=3 gets 7 and a conflict that says how to settle it;
// read_entity=false takes the URL's values and lists every entity
// setting as unread.
func TestSourceReadFromTheEntity(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue(t, sbemu.Entity{DeliveryLimit: 7, Lock: 5 * time.Second})
	topicName, subPath := e.createSubscription(t, sbemu.Entity{DeliveryLimit: 7, Lock: 5 * time.Second})
	mux := new(broker.URLMux)
	// AdminEndpoint, not AdminOptions: what the environment variable sets
	o := &servicebus.URLOpener{ConnectionString: e.emu.ConnectionString, ClientOptions: e.emu.ClientOptions(), AdminEndpoint: e.emu.AdminEndpoint}
	mux.RegisterTopic(servicebus.Scheme, o)
	mux.RegisterSubscription(servicebus.Scheme, o)
	ctx := t.Context()
	sub := func(u string) capability.Subscription {
		t.Helper()
		s, err := mux.OpenSubscription(ctx, u)
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		defer s.Close()
		return s.Capabilities()
	}

	for _, c := range []struct{ url, read string }{
		{"servicebus://" + q, "queue " + q + " through the administration API"},
		{"servicebus://" + subPath, "subscription " + subPath + " and its topic through the administration API"},
	} {
		got := sub(c.url)
		if got.DeliveryLimit != 7 || !got.DeadLetter || got.LockTimeout != 5*time.Second {
			t.Errorf("%s: %s, want the entity's limit 7 with its dead-letter queue and lock 5s", c.url, got)
		}
		if got.Source.Read != c.read || len(got.Source.Unread) != 0 || len(got.Source.Conflicts) != 0 {
			t.Errorf("%s: source %+v, want read %q and nothing else", c.url, got.Source, c.read)
		}
	}

	got := sub("servicebus://" + q + "?max_delivery_count=3&lock_duration=5s")
	want := []capability.Conflict{{Setting: capability.SettingDeliveryLimit, Stated: "max_delivery_count=3 in the URL", Held: "MaxDeliveryCount 7",
		Fix: "drop max_delivery_count from the URL, or set the entity's MaxDeliveryCount to 3"}}
	if got.DeliveryLimit != 7 || !slices.Equal(got.Source.Conflicts, want) {
		t.Errorf("a URL stating 3: limit %d, conflicts %+v, want 7 and %+v", got.DeliveryLimit, got.Source.Conflicts, want)
	}

	got = sub("servicebus://" + q + "?read_entity=false&max_delivery_count=3")
	if got.DeliveryLimit != 3 || got.Source.Read != "" || len(got.Source.Conflicts) != 0 {
		t.Errorf("read_entity=false: %s, source %+v: want the URL's limit 3, nothing read", got, got.Source)
	}
	for _, s := range []capability.Setting{capability.SettingDeliveryLimit, capability.SettingLockTimeout, capability.SettingRedeliveryHorizon, capability.SettingOrdering} {
		if !got.Source.IsUnread(s) {
			t.Errorf("read_entity=false: %s is not unread: %+v", s, got.Source.Unread)
		}
	}
	if u := got.Source.Unread[0]; u.Why != "read_entity=false: taken from the URL (max_delivery_count=3)" || !strings.Contains(u.Fix, servicebus.EnvAdminEndpoint) {
		t.Errorf("unread delivery limit: %+v", u)
	}

	// The publisher's side: the dedup window the URL states is not the
	// queue's (off); a topic entity is read as one.
	top, err := mux.OpenTopic(ctx, "servicebus://"+q+"?dedup_window=1m")
	if err != nil {
		t.Fatal(err)
	}
	tc := top.Capabilities()
	_ = top.Close()
	if tc.DedupWindow != 0 || len(tc.Source.Conflicts) != 1 || tc.Source.Conflicts[0].Setting != capability.SettingDedupWindow ||
		tc.Source.Conflicts[0].Held != "DuplicateDetectionHistoryTimeWindow off" {
		t.Errorf("topic with dedup_window=1m: %s, source %+v", tc, tc.Source)
	}
	top, err = mux.OpenTopic(ctx, "servicebus://"+topicName)
	if err != nil {
		t.Fatal(err)
	}
	tc = top.Capabilities()
	_ = top.Close()
	if tc.Source.Read != "topic "+topicName+" through the administration API" || len(tc.Source.Unread)+len(tc.Source.Conflicts) != 0 {
		t.Errorf("topic: source %+v", tc.Source)
	}
}

// TestAdminEndpointFromTheEnvironment: with no AdminOptions, the opener
// sends administration requests where WARY_SERVICEBUS_ADMIN_ENDPOINT
// says, so a plain URL reads the emulator's entity; without it they go to
// the namespace's https endpoint, which on the emulator is its AMQP port:
// the open fails with an *EntityReadError that says what to set and
// holds no key.
func TestAdminEndpointFromTheEnvironment(t *testing.T) {
	e := newEnv(t)
	if e.emu.Real {
		t.Skip("runs on the emulator, whose AMQP port does not answer HTTPS")
	}
	q := e.createQueue(t, sbemu.Entity{DeliveryLimit: 7})
	// AdminOptions without a transport of their own keep theirs: no
	// retries of the failing read below
	noRetries := &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}}
	o := &servicebus.URLOpener{ConnectionString: e.emu.ConnectionString, ClientOptions: e.emu.ClientOptions(), AdminOptions: noRetries}
	mux := new(broker.URLMux)
	mux.RegisterSubscription(servicebus.Scheme, o)
	ctx := t.Context()

	t.Setenv(servicebus.EnvAdminEndpoint, e.emu.AdminEndpoint)
	s, err := mux.OpenSubscription(ctx, "servicebus://"+q)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Capabilities(); c.DeliveryLimit != 7 || c.Source.Read == "" {
		t.Errorf("read through %s: %s, source %+v", servicebus.EnvAdminEndpoint, c, c.Source)
	}
	_ = s.Close()

	t.Setenv(servicebus.EnvAdminEndpoint, "")
	_, err = mux.OpenSubscription(ctx, "servicebus://"+q)
	var re *servicebus.EntityReadError
	if !errors.As(err, &re) || !errors.Is(err, broker.ErrRetryable) {
		t.Fatalf("without the admin endpoint: %v, want an *EntityReadError, retryable", err)
	}
	for _, want := range []string{`queue "` + q + `"`, "set " + servicebus.EnvAdminEndpoint, "read_entity=false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	t.Logf("without the admin endpoint: %v", err)
	if strings.Contains(err.Error(), "SharedAccessKey") {
		t.Errorf("the error holds the key: %v", err)
	}
}

// TestAdminEndpointRefusals: an administration API that answers 401 fails
// the open as PermissionDenied with the fix; an endpoint set twice, or
// plain http off loopback, is ErrInvalid; no error holds the key.
func TestAdminEndpointRefusals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	const cs = "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=hushhush;UseDevelopmentEmulator=true"
	t.Setenv(servicebus.EnvAdminEndpoint, "")
	ctx := context.Background()
	open := func(o *servicebus.URLOpener, u string) error {
		mux := new(broker.URLMux)
		mux.RegisterSubscription(servicebus.Scheme, o)
		s, err := mux.OpenSubscription(ctx, u)
		if err == nil {
			_ = s.Close()
		}
		if err != nil && strings.Contains(err.Error(), "hushhush") {
			t.Errorf("%s: the error holds the key: %v", u, err)
		}
		return err
	}
	err := open(&servicebus.URLOpener{ConnectionString: cs, AdminEndpoint: srv.URL}, "servicebus://orders")
	var re *servicebus.EntityReadError
	if !errors.As(err, &re) || re.Status != http.StatusUnauthorized || !errors.Is(err, broker.ErrPermission) || !strings.Contains(err.Error(), "Manage") {
		t.Errorf("401: %v, want an *EntityReadError with status 401, ErrPermission, naming the Manage right", err)
	}
	e := newEnv(t)
	both := &servicebus.URLOpener{ConnectionString: cs, AdminEndpoint: srv.URL, AdminOptions: e.emu.AdminClientOptions()}
	if both.AdminOptions != nil {
		if err := open(both, "servicebus://orders"); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("AdminEndpoint and AdminOptions.Transport: %v, want ErrInvalid", err)
		}
	}
	if err := open(&servicebus.URLOpener{ConnectionString: cs, AdminEndpoint: "http://10.0.0.1:1"}, "servicebus://orders"); !errors.Is(err, broker.ErrInvalid) ||
		!strings.Contains(err.Error(), "loopback") || strings.Contains(err.Error(), "10.0.0.1") {
		t.Errorf("plain http off loopback: %v, want ErrInvalid saying loopback, not repeating the endpoint", err)
	}
}
