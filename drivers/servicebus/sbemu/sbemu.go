// Package sbemu starts wary's Azure Service Bus emulator
// (the Node + rhea program in its folder emulator) for tests, or points them at
// a real namespace when WARY_SERVICEBUS_CONNECTION_STRING is set.
//
// The azservicebus SDK honours the port of an "sb://host:port" endpoint when
// the connection string carries UseDevelopmentEmulator=true, and that flag
// also turns TLS off (plain amqp://), so no custom dialer is needed: the
// connection string alone is enough.
package sbemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/nodeproc"
	"github.com/wary-go/wary/redact"
)

// Environment variables the helper reads.
const (
	EnvConnectionString = "WARY_SERVICEBUS_CONNECTION_STRING"
	// EnvAdminEndpoint, with EnvConnectionString, is where administration
	// requests go instead of https://<namespace>/: Microsoft's emulator
	// serves the administration API over plain HTTP on a port of its own
	// (5300), which a connection string cannot name.
	EnvAdminEndpoint   = servicebus.EnvAdminEndpoint
	EnvRequireServices = "WARY_REQUIRE_SERVICES"
	EnvDebug           = "WARY_SB_EMULATOR_DEBUG"
)

// dummyKey is what the emulator's connection string carries: the emulator
// accepts any token. It is not a secret, but it is never logged either.
const dummyKey = "ZW11bGF0b3Itbm90LWEtc2VjcmV0"

const readyTimeout = 60 * time.Second

// Emulator is a running emulator, or a real namespace.
type Emulator struct {
	// ConnectionString is the connection string to pass to
	// azservicebus.NewClientFromConnectionString.
	ConnectionString string
	// Real is true when the tests run against WARY_SERVICEBUS_CONNECTION_STRING.
	Real bool
	// Port is the emulator's AMQP port (0 when Real).
	Port int
	// AdminPort is the port of the emulator's administration API over
	// plain HTTP (0 when Real).
	AdminPort int
	// AdminEndpoint is where AdminClient sends administration requests:
	// http://127.0.0.1:AdminPort for the emulator,
	// WARY_SERVICEBUS_ADMIN_ENDPOINT when Real, empty for the namespace's
	// own https endpoint.
	AdminEndpoint string

	adminOpts *admin.ClientOptions // sends the admin client to AdminEndpoint
}

// Start starts an emulator serving topology and stops it when the test ends.
// When WARY_SERVICEBUS_CONNECTION_STRING is set it starts nothing and returns
// that namespace: the entities must then exist with the names in topology.
// If node is missing or npm ci fails the test is skipped, or fails when
// WARY_REQUIRE_SERVICES=1.
func Start(t conformance.T, topology Topology) *Emulator {
	t.Helper()
	if cs := os.Getenv(EnvConnectionString); cs != "" {
		ep := os.Getenv(EnvAdminEndpoint)
		opts, _, err := servicebus.AdminClientOptions(ep) // its transport keeps no idle connections
		if err != nil {
			t.Fatalf("servicebus: %s: %v", EnvAdminEndpoint, err)
		}
		return &Emulator{ConnectionString: cs, Real: true, AdminEndpoint: ep, adminOpts: opts}
	}
	e, stop, err := Launch(topology)
	if err != nil {
		var u *UnavailableError
		if errors.As(err, &u) {
			nodeproc.Unavailable(t, "%v", err)
		}
		// node and the dependencies are there: an emulator that does not
		// start is a bug, not a missing service
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if stderr := stop(); t.Failed() && stderr != "" {
			t.Logf("servicebus emulator stderr:\n%s", stderr)
		}
	})
	return e
}

// UnavailableError says that the emulator cannot run here (node, npm or
// its sources missing): tests skip, unless WARY_REQUIRE_SERVICES=1.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return "servicebus emulator unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Launch starts the emulator serving topology on loopback (running npm ci
// in Dir first if node_modules is missing), whatever the environment
// says, and returns it with the function that stops it and returns what
// it wrote on stderr. An *UnavailableError means it cannot run here.
func Launch(topology Topology) (*Emulator, func() string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, nil, &UnavailableError{errors.New("node not found on PATH")}
	}
	dir, err := Dir()
	if err != nil {
		return nil, nil, &UnavailableError{err}
	}
	if err := nodeproc.EnsureDeps(dir, "rhea"); err != nil {
		return nil, nil, &UnavailableError{fmt.Errorf("npm ci failed: %w", err)}
	}
	cfg, err := json.Marshal(topology)
	if err != nil {
		return nil, nil, fmt.Errorf("servicebus emulator: topology: %w", err)
	}
	tmp, err := os.MkdirTemp("", "sbemu-")
	if err != nil {
		return nil, nil, fmt.Errorf("servicebus emulator: %w", err)
	}
	cfgPath := filepath.Join(tmp, "topology.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, nil, fmt.Errorf("servicebus emulator: %w", err)
	}
	port, adminPort, stop, err := launch(node, dir, cfgPath)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, nil, fmt.Errorf("servicebus emulator: %w", err)
	}
	stopAll := func() string {
		s := stop()
		_ = os.RemoveAll(tmp)
		return s
	}
	ep := "http://127.0.0.1:" + strconv.Itoa(adminPort)
	opts, _, err := servicebus.AdminClientOptions(ep)
	if err != nil {
		stopAll()
		return nil, nil, fmt.Errorf("servicebus emulator: %w", err)
	}
	return &Emulator{ConnectionString: connectionString(port), Port: port, AdminPort: adminPort, AdminEndpoint: ep, adminOpts: opts}, stopAll, nil
}

// NewClient returns a client for the emulator (or the real namespace),
// closed when the test ends.
func (e *Emulator) NewClient(t conformance.T) *azservicebus.Client {
	t.Helper()
	client, err := azservicebus.NewClientFromConnectionString(e.ConnectionString, e.ClientOptions())
	if err != nil {
		t.Fatalf("servicebus client: %v", redact.String(err.Error()))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Close(ctx)
	})
	return client
}

// ClientOptions returns the options a client needs: the port and plain AMQP
// come from the connection string, so only retries are shortened against
// the emulator (a refused operation fails fast instead of retrying for
// minutes).
func (e *Emulator) ClientOptions() *azservicebus.ClientOptions {
	if e.Real {
		return nil
	}
	return &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{
			MaxRetries:    2,
			RetryDelay:    50 * time.Millisecond,
			MaxRetryDelay: 200 * time.Millisecond,
		},
	}
}

func connectionString(port int) string {
	return "Endpoint=sb://127.0.0.1:" + strconv.Itoa(port) +
		";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + dummyKey +
		";UseDevelopmentEmulator=true"
}

// Dir is the emulator's folder (its emulator folder, beside this file).
func Dir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the emulator sources")
	}
	dir := filepath.Join(filepath.Dir(file), "emulator")
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		return "", fmt.Errorf("emulator sources not found: %w", err)
	}
	return filepath.Clean(dir), nil
}

func launch(node, dir, cfgPath string) (int, int, func() string, error) {
	cmd := exec.Command(node, filepath.Join("src", "main.js"),
		"--config", cfgPath, "--port", "0", "--host", "127.0.0.1", "--exit-on-stdin-close")
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, 0, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, nil, err
	}
	stderr := &nodeproc.SyncBuffer{}
	if os.Getenv(EnvDebug) != "" {
		cmd.Stderr = io.MultiWriter(stderr, os.Stderr)
	} else {
		cmd.Stderr = stderr
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, nil, err
	}
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waited)
	}()
	stop := func() string {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		<-waited
		return stderr.String()
	}
	type ports struct{ amqp, admin int }
	ready := make(chan ports, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		admin := 0
		for sc.Scan() {
			line := sc.Text()
			if p, ok := strings.CutPrefix(line, "ADMIN "); ok && !sent {
				admin, _ = strconv.Atoi(strings.TrimSpace(p))
			}
			if p, ok := strings.CutPrefix(line, "LISTENING "); ok && !sent {
				if port, err := strconv.Atoi(strings.TrimSpace(p)); err == nil {
					ready <- ports{port, admin}
					sent = true
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case p := <-ready:
		return p.amqp, p.admin, stop, nil
	case <-waited:
		stop()
		return 0, 0, nil, fmt.Errorf("exited before it was ready: %s", nodeproc.LastLines(stderr.String(), 10))
	case <-time.After(readyTimeout):
		stop()
		return 0, 0, nil, fmt.Errorf("not ready after %s: %s", readyTimeout, nodeproc.LastLines(stderr.String(), 10))
	}
}
