package sbemu_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// With WARY_SERVICEBUS_CONNECTION_STRING naming Microsoft's emulator, whose
// administration API listens over plain HTTP on a port of its own,
// WARY_SERVICEBUS_ADMIN_ENDPOINT sends the admin client's requests there
// (signed, and with the namespace as Host), so that tests can still create
// their entities at run time.
func TestAdminEndpointFromEnvironment(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Clone(context.Background()))
		mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	t.Setenv(sbemu.EnvConnectionString, "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;")
	t.Setenv(sbemu.EnvAdminEndpoint, srv.URL)
	emu := sbemu.Start(t, sbemu.Topology{})
	if !emu.Real || emu.AdminEndpoint != srv.URL {
		t.Fatalf("Start: real %v, admin endpoint %q", emu.Real, emu.AdminEndpoint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := emu.AdminClient(t).GetQueue(ctx, "orders", nil)
	if err != nil || q != nil {
		t.Fatalf("GetQueue of a missing queue: %v, %v", q, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 {
		t.Fatal("no request reached the administration endpoint")
	}
	r := got[0]
	if !strings.HasPrefix(r.URL.Path, "/orders") || r.Host != "localhost" || r.Header.Get("Authorization") == "" {
		t.Fatalf("request %s %s, Host %q, signed %v", r.Method, r.URL, r.Host, r.Header.Get("Authorization") != "")
	}
}

// An endpoint that is not http(s)://HOST[:PORT], or plain http to a host
// other than loopback (the requests carry a token signed with the key),
// fails the test without repeating the value.
func TestAdminEndpointRefused(t *testing.T) {
	t.Setenv(sbemu.EnvConnectionString, "Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;")
	for _, ep := range []string{
		"http://example.com:5300",
		"ftp://127.0.0.1:5300",
		"http://user:hush-hush@127.0.0.1:5300",
		"127.0.0.1:5300",
		"http://127.0.0.1:5300/path",
	} {
		t.Setenv(sbemu.EnvAdminEndpoint, ep)
		ft := &fatalT{TB: t}
		done := make(chan struct{})
		go func() { // Fatalf ends the goroutine, as in go test
			defer close(done)
			sbemu.Start(ft, sbemu.Topology{})
		}()
		<-done
		if !ft.failed {
			t.Errorf("%s: accepted", ep)
		} else if strings.Contains(ft.msg, "hush-hush") || strings.Contains(ft.msg, "example.com") {
			t.Errorf("%s: the failure repeats the value: %s", ep, ft.msg)
		}
	}
}

// fatalT records a Fatalf and ends its goroutine.
type fatalT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fatalT) Helper() {}
func (f *fatalT) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
