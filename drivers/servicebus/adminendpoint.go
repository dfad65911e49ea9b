package servicebus

import (
	"errors"
	"net"
	"net/http"
	"net/url"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// EnvAdminEndpoint names the environment variable that gives the
// administration endpoint of the namespace in
// WARY_SERVICEBUS_CONNECTION_STRING, read by the wary command and by the
// test emulator (package sbemu). The SDK's admin client addresses
// https://NAMESPACE/; Microsoft's emulator (http://127.0.0.1:5300) and
// wary's serve the administration API elsewhere, over plain HTTP.
const EnvAdminEndpoint = "WARY_SERVICEBUS_ADMIN_ENDPOINT"

// AdminClientOptions returns an administration client's options for
// endpoint: nil when it is empty (the namespace's own https endpoint); otherwise a
// transport that sends the client's requests, keeping their path, query
// and Host header, to endpoint, http(s)://HOST[:PORT]. Plain http is
// accepted only on a loopback address: the requests carry a token signed
// with the namespace's key. The error never repeats endpoint. The
// transport keeps no idle connections; close releases what it holds.
func AdminClientOptions(endpoint string) (opts *admin.ClientOptions, close func(), err error) {
	if endpoint == "" {
		return nil, func() {}, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, nil, errors.New("not an endpoint (want http://127.0.0.1:PORT or https://HOST[:PORT])")
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return nil, nil, errors.New("plain http is accepted only on a loopback address (requests carry a token)")
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	tr := redirect{scheme: u.Scheme, host: u.Host, client: hc}
	return &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: tr}}, hc.CloseIdleConnections, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redirect is an azcore transport that sends each request to scheme://host,
// keeping its path, query and Host header.
type redirect struct {
	scheme, host string
	client       *http.Client
}

func (r redirect) Do(req *http.Request) (*http.Response, error) {
	u := *req.URL
	u.Scheme, u.Host = r.scheme, r.host
	out := req.Clone(req.Context())
	out.URL = &u
	out.Host = req.URL.Host
	return r.client.Do(out)
}
