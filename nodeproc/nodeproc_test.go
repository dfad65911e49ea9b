//go:build unix

package nodeproc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEnsureDepsWaitsForInstall: while one caller's npm ci is still
// writing (it has written the package's package.json, not the rest), a
// second caller returns only after that install ended. A fake npm on PATH
// signals through FIFOs when it is mid-install and waits to be let go.
func TestEnsureDepsWaitsForInstall(t *testing.T) {
	dir, bin := t.TempDir(), t.TempDir()
	mid, release := filepath.Join(bin, "mid"), filepath.Join(bin, "release")
	for _, f := range []string{mid, release} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := "#!/bin/sh\nmkdir -p node_modules/pkg && echo '{}' > node_modules/pkg/package.json\n" +
		"echo mid > " + mid + "\nread x < " + release + "\necho done > node_modules/.done\n"
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	first := make(chan error, 1)
	go func() { first <- EnsureDeps(dir, "pkg") }()
	if _, err := os.ReadFile(mid); err != nil { // the fake npm is mid-install once it wrote this
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() { second <- EnsureDeps(dir, "pkg") }()
	// The second caller must either wait for the lock (a blocked request
	// in /proc/locks) or return, which would be early.
	lock, err := os.Stat(filepath.Join(dir, ".npm-ci.lock"))
	if err != nil {
		t.Fatal(err)
	}
	ino := fmt.Sprintf(":%d ", lock.Sys().(*syscall.Stat_t).Ino)
	for blocked := false; !blocked; {
		select {
		case err := <-second:
			t.Fatalf("the second caller returned (%v) while npm ci was still installing", err)
		case err := <-first:
			t.Fatalf("the first caller returned (%v) before its npm ci ended", err)
		case <-time.After(5 * time.Millisecond): // no signal for "waits for a lock": look again
		}
		locks, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Skipf("cannot see whether the second caller waits: %v", err)
		}
		for _, l := range strings.Split(string(locks), "\n") {
			blocked = blocked || strings.Contains(l, "->") && strings.Contains(l, ino)
		}
	}
	if err := os.WriteFile(release, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".done")); err != nil {
		t.Fatalf("the install did not finish: %v", err)
	}
}
