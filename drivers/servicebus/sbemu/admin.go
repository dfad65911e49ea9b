package sbemu

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
)

// AdminClient returns an administration client for the emulator (or the real
// namespace). The SDK addresses https://<namespace>/; against the emulator a
// transport sends those requests over plain HTTP to AdminPort on loopback,
// where the emulator serves the administration API's subset for queues,
// topics and subscriptions (create, get, delete). Against
// WARY_SERVICEBUS_CONNECTION_STRING they go to WARY_SERVICEBUS_ADMIN_ENDPOINT
// when it is set (Microsoft's emulator), else to the namespace.
func (e *Emulator) AdminClient(t conformance.T) *admin.Client {
	t.Helper()
	c, err := admin.NewClientFromConnectionString(e.ConnectionString, e.AdminClientOptions())
	if err != nil {
		t.Fatalf("servicebus admin client: %v", broker.RedactString(err.Error()))
	}
	return c
}

// AdminClientOptions returns the options that send an admin client's
// requests to AdminEndpoint (nil when it is empty: a namespace's own
// https endpoint).
func (e *Emulator) AdminClientOptions() *admin.ClientOptions { return e.adminOpts }

// loopbackClient keeps no idle connections, so that tests checking for
// leaked goroutines do not find its keep-alive loops.
var loopbackClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// EntityState is what the emulator reports about an entity's receivers.
type EntityState struct {
	Consumers      int      `json:"consumers"`
	PendingAccepts int      `json:"pendingAccepts"`
	Messages       int      `json:"messages"`
	LockedSessions []string `json:"lockedSessions"`
}

// State reads an entity's state from the emulator (not available on a real
// namespace).
func (e *Emulator) State(ctx context.Context, path string) (EntityState, error) {
	var st EntityState
	if e.Real {
		return st, fmt.Errorf("entity state is only available on the emulator")
	}
	u := "http://127.0.0.1:" + strconv.Itoa(e.AdminPort) + "/$emulator/state/" + url.PathEscape(path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return st, err
	}
	res, err := loopbackClient.Do(req)
	if err != nil {
		return st, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return st, fmt.Errorf("entity state %s: %s", path, res.Status)
	}
	return st, json.NewDecoder(res.Body).Decode(&st)
}
