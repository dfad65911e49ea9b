package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/redact"
)

// EnvServiceBusAdmin names the environment variable that gives
// --servicebus-admin-endpoint's default.
const EnvServiceBusAdmin = servicebus.EnvAdminEndpoint

// serviceBusHarness probes a Service Bus namespace (the connection string
// in $WARY_SERVICEBUS_CONNECTION_STRING): each scenario gets a scratch
// queue, created and deleted through the administration API, with the
// lock duration (at least 5s, the service's minimum), MaxDeliveryCount
// (so its dead-letter sub-queue receives what exceeds it) and duplicate
// detection window the scenario asks for; sessions=true makes it a
// session queue, topic=true a topic with one subscription. The driver
// declares what it reads back from the entity. Entities have no message
// TTL, so the horizon is unbounded.
//
// An emulator serves the administration API apart from AMQP, over plain
// HTTP: admin_endpoint (--servicebus-admin-endpoint or
// $WARY_SERVICEBUS_ADMIN_ENDPOINT) sends the administration client's
// requests there; the harness then takes the server for an emulator,
// which accepts windows shorter than the service's minimums.
func serviceBusHarness(ctx context.Context, u *url.URL, getenv func(string) string) (conformance.Harness, func(), error) {
	q := u.Query()
	cs := getenv(EnvServiceBus)
	if cs == "" {
		return conformance.Harness{}, nil, fmt.Errorf("probe %s: name the namespace in $%s", redact.URL(u), EnvServiceBus)
	}
	var sessions, topic bool
	for k, v := range q {
		var err error
		switch k {
		case "sessions":
			sessions, err = strconv.ParseBool(v[0])
		case "topic":
			topic, err = strconv.ParseBool(v[0])
		default:
			err = errors.New("unknown parameter (want sessions, topic)")
		}
		if err != nil {
			return conformance.Harness{}, nil, fmt.Errorf("probe %s: %s: %w", redact.URL(u), k, err)
		}
	}
	ao, closeTransport, err := servicebus.AdminClientOptions(getenv(EnvServiceBusAdmin))
	if err != nil {
		return conformance.Harness{}, nil, fmt.Errorf("probe: --servicebus-admin-endpoint: %w", err)
	}
	adm, err := admin.NewClientFromConnectionString(cs, ao)
	if err != nil {
		closeTransport()
		return conformance.Harness{}, nil, errors.New("probe: the Service Bus connection string does not parse") // the SDK's message may quote it
	}
	client, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		closeTransport()
		return conformance.Harness{}, nil, errors.New("probe: the Service Bus connection string does not parse")
	}
	// One call up front, so that an unreachable administration API is a
	// connection error (exit 2) rather than every scenario failing.
	if _, err := adm.GetQueue(ctx, scratchName("wary-probe"), nil); err != nil { // absent: nil, nil
		_ = client.Close(ctx)
		closeTransport()
		return conformance.Harness{}, nil, fmt.Errorf("probe %s: the administration API does not answer (give --servicebus-admin-endpoint for an emulator): %w", redact.URL(u), err)
	}
	h := conformance.Harness{
		Name:              "probe " + redact.URL(u),
		RedeliveryHorizon: capability.HorizonUnbounded,
		Setup: func(ctx context.Context, t conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			send, path, err := createScratch(ctx, t, adm, sessions, topic, cfg)
			if err != nil {
				return nil, err
			}
			topts := &servicebus.TopicOptions{Admin: adm}
			if topic {
				// A topic does not know whether its subscriptions require
				// sessions (and so a key): that is declared to it.
				topts.Entity = servicebus.TopicProperties{RequiresSession: sessions}
			}
			top, err := servicebus.OpenTopic(ctx, client, send, topts)
			if err != nil {
				return nil, err
			}
			so := &servicebus.SubscriptionOptions{Admin: adm, SessionIdle: 500 * time.Millisecond, ReceiveWait: 500 * time.Millisecond}
			return &conformance.Fixture{
				Topic: top,
				Subscribe: func(ctx context.Context) (*broker.Subscription, error) {
					return servicebus.OpenSubscription(ctx, client, path, so)
				},
				DeadLetters: func(ctx context.Context) (*broker.Subscription, error) {
					return servicebus.OpenDeadLetters(ctx, client, path, so)
				},
			}, nil
		},
	}
	if ao == nil {
		// A namespace (not an emulator): locks are at least 5s and the
		// duplicate detection window at least 20s.
		h.FixedWaits = "the service's lock duration is at least 5s and its duplicate detection window at least 20s"
		h.MaxWait = 45 * time.Second
	}
	return h, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Close(ctx)
		closeTransport()
	}, nil
}

// createScratch creates a scratch queue, or topic and subscription, for a
// scenario, deleted when it ends; it returns the entity to send to and the
// path to receive from.
func createScratch(ctx context.Context, t conformance.T, adm *admin.Client, sessions, topic bool, cfg conformance.Config) (send, path string, err error) {
	name := scratchName("wary-probe")
	lock := max(cfg.LockTimeout, minLock)
	tp := servicebus.TopicProperties{RequiresSession: sessions, DuplicateDetectionWindow: max(cfg.DedupWindow, 0)}
	sp := servicebus.SubscriptionProperties{RequiresSession: sessions, LockDuration: lock, MaxDeliveryCount: max(cfg.DeliveryLimit, 0)}
	del := func(f func(context.Context) error) {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = f(ctx)
		})
	}
	if !topic {
		if err := servicebus.CreateQueue(ctx, adm, name, tp, sp); err != nil {
			return "", "", err
		}
		del(func(ctx context.Context) error { _, err := adm.DeleteQueue(ctx, name, nil); return err })
		return name, name, nil
	}
	if err := servicebus.CreateTopic(ctx, adm, name, tp); err != nil {
		return "", "", err
	}
	del(func(ctx context.Context) error { _, err := adm.DeleteTopic(ctx, name, nil); return err })
	if err := servicebus.CreateSubscription(ctx, adm, name, "probe", sp); err != nil {
		return "", "", err
	}
	return name, name + "/Subscriptions/probe", nil
}

// minLock is the service's shortest lock duration.
const minLock = 5 * time.Second
