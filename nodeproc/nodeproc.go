// Package nodeproc is test support for wary's Node-based emulators (sbemu
// for Service Bus, sqsemu for fauxqs): it installs their npm dependencies
// once per machine under a file lock, runs a command in a process group of
// its own, collects a child's output, and skips or fails a test when an
// emulator cannot run.
//
// It is a module of its own (github.com/wary-go/wary/nodeproc), requiring
// nothing but the standard library and versioned on its own: the driver
// modules whose emulators use it (drivers/sqsfifo, drivers/servicebus)
// cannot import the root's internal packages, which a root release may
// change under them, and no root release changes this one. Its API is
// small and kept stable: Unavailable, EnsureDeps, LastLines, SyncBuffer,
// and on Unix RunCommand with its Command.
package nodeproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// EnvRequireServices set to "1" turns "emulator unavailable" into a failure.
const EnvRequireServices = "WARY_REQUIRE_SERVICES"

// TB is the part of a test (testing.TB, conformance.T) that Unavailable
// uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// Unavailable skips the test, or fails it with WARY_REQUIRE_SERVICES=1.
func Unavailable(t TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(EnvRequireServices) == "1" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// EnsureDeps runs `npm ci` in dir once, under a file lock shared by every
// test binary, unless node_modules/<pkg>/package.json is already there.
// The check too is made under the lock: npm writes pkg's package.json
// before it has finished writing the rest (the node binary among them), so
// a process that looked without the lock could start a half-installed
// emulator ("text file busy").
func EnsureDeps(dir, pkg string) error {
	present := func() bool {
		_, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json"))
		return err == nil
	}
	unlock, err := lockFile(filepath.Join(dir, ".npm-ci.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if present() {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return errors.New("npm not found on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, LastLines(string(out), 5))
	}
	if !present() {
		return fmt.Errorf("npm ci finished but node_modules/%s is missing", pkg)
	}
	return nil
}

// LastLines returns the last n lines of s joined by " | ".
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// SyncBuffer collects a child's output (up to 1 MiB) for failure reports;
// it is safe for concurrent use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
