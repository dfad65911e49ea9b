package sbemu

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/redact"
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
		t.Fatalf("servicebus admin client: %v", redact.String(err.Error()))
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
	return st, e.getJSON(ctx, "/$emulator/state/"+url.PathEscape(path), "entity state "+path, &st)
}

// getJSON reads one of the emulator's own JSON endpoints on its admin port.
func (e *Emulator) getJSON(ctx context.Context, path, what string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(e.AdminPort)+path, nil)
	if err != nil {
		return err
	}
	res, err := loopbackClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", what, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// Stats is what the emulator counts across all its connections.
type Stats struct {
	// DroppedConnections counts connections the emulator closed on a
	// protocol or read error.
	DroppedConnections int `json:"droppedConnections"`
	// IgnoredEnds counts end frames received for a channel whose session
	// had already ended (or never began), which the emulator ignores as
	// the service does.
	IgnoredEnds int `json:"ignoredEnds"`
}

// Stats reads the emulator's counters (not available on a real namespace).
func (e *Emulator) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	if e.Real {
		return st, fmt.Errorf("emulator stats are only available on the emulator")
	}
	return st, e.getJSON(ctx, "/$emulator/stats", "emulator stats", &st)
}
