package sbemu

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// AdminClient returns an administration client for the emulator (or the real
// namespace). The SDK addresses https://<namespace>/; against the emulator a
// transport sends those requests over plain HTTP to AdminPort on loopback,
// where the emulator serves the administration API's subset for queues,
// topics and subscriptions (create, get, delete).
func (e *Emulator) AdminClient(t testing.TB) *admin.Client {
	t.Helper()
	var opts *admin.ClientOptions
	if !e.Real {
		opts = &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
			Transport: loopbackTransport{port: e.AdminPort},
		}}
	}
	c, err := admin.NewClientFromConnectionString(e.ConnectionString, opts)
	if err != nil {
		t.Fatalf("servicebus admin client: %v", Redact(err.Error()))
	}
	return c
}

// AdminClientOptions returns the options that point an admin client at the
// emulator (nil for a real namespace).
func (e *Emulator) AdminClientOptions() *admin.ClientOptions {
	if e.Real {
		return nil
	}
	return &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: loopbackTransport{port: e.AdminPort}}}
}

type loopbackTransport struct{ port int }

func (l loopbackTransport) Do(req *http.Request) (*http.Response, error) {
	u := *req.URL
	u.Scheme = "http"
	u.Host = "127.0.0.1:" + strconv.Itoa(l.port)
	r := req.Clone(req.Context())
	r.URL = &u
	r.Host = req.URL.Host
	return loopbackClient.Do(r)
}

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
