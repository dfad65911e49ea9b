package postgres_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// privateCluster is a PostgreSQL cluster of one test's own, in a
// temporary directory, on a free port of 127.0.0.1 (trust auth, the
// database postgres, wal_level=logical): a test may restart or crash it,
// which the shared server must not be. It is stopped when the test ends,
// leaving no process behind.
type privateCluster struct {
	t         testing.TB
	bin, data string
	as        *syscall.Credential // the postgres OS user's, when running as root
	URL       string
}

// pgBinDir returns the directory of PostgreSQL's server binaries (initdb
// and pg_ctl): pg_config --bindir, or the newest /usr/lib/postgresql/*/bin.
func pgBinDir() (string, error) {
	has := func(dir string) bool {
		_, err1 := os.Stat(filepath.Join(dir, "initdb"))
		_, err2 := os.Stat(filepath.Join(dir, "pg_ctl"))
		return err1 == nil && err2 == nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); has(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return n
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	return "", errors.New("no initdb and pg_ctl in pg_config --bindir nor in /usr/lib/postgresql/*/bin")
}

// newPrivateCluster creates and starts a private cluster, or skips t (fails
// it, with WARY_REQUIRE_SERVICES=1) when PostgreSQL's binaries are missing.
func newPrivateCluster(t testing.TB) *privateCluster {
	t.Helper()
	bin, err := pgBinDir()
	if err != nil {
		if os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
			t.Fatalf("a private PostgreSQL cluster: %v", err)
		}
		t.Skipf("a private PostgreSQL cluster needs PostgreSQL's binaries (WARY_REQUIRE_SERVICES=1 to fail): %v", err)
	}
	dir := t.TempDir()
	c := &privateCluster{t: t, bin: bin, data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 { // initdb and postgres refuse to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("a private PostgreSQL cluster, as root, runs as the OS user postgres: %v", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		c.as = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// The user must reach the directory through t.TempDir's parent.
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	c.run("initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	// fsync is off: an immediate shutdown ends the server's processes, not
	// the machine, and what they wrote to the OS survives it.
	conf := fmt.Sprintf("\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\n"+
		"wal_level = logical\nmax_replication_slots = 4\nmax_wal_senders = 4\nfsync = off\n", port, dir)
	f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	c.start()
	return c
}

// freePort returns a TCP port of 127.0.0.1 free a moment ago.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// run runs one of PostgreSQL's programs, as the postgres OS user when the
// test runs as root, failing the test if it fails.
func (c *privateCluster) run(prog string, args ...string) {
	c.t.Helper()
	if err := c.try(prog, args...); err != nil {
		c.t.Fatal(err)
	}
}

func (c *privateCluster) try(prog string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, prog), args...)
	cmd.Dir = filepath.Dir(c.data)
	if c.as != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.as}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s%s", prog, strings.Join(args, " "), err, out, c.logTail())
	}
	return nil
}

func (c *privateCluster) logFile() string { return filepath.Join(filepath.Dir(c.data), "server.log") }

// logTail returns the end of the server's log.
func (c *privateCluster) logTail() string {
	b, _ := os.ReadFile(c.logFile())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (c *privateCluster) start() {
	c.t.Helper()
	c.run("pg_ctl", "-D", c.data, "-l", c.logFile(), "-w", "-t", "120", "start")
}

// Restart stops the server cleanly (fast: open sessions are ended, a
// shutdown checkpoint is written) and starts it again.
func (c *privateCluster) Restart() {
	c.t.Helper()
	c.run("pg_ctl", "-D", c.data, "-l", c.logFile(), "-w", "-t", "120", "-m", "fast", "restart")
}

// Crash stops the server at once (immediate: its processes quit without a
// checkpoint; the next start recovers from the log) and starts it again.
func (c *privateCluster) Crash() {
	c.t.Helper()
	c.run("pg_ctl", "-D", c.data, "-w", "-t", "120", "-m", "immediate", "stop")
	c.start()
}

// stop stops the server, and fails the test if one of its processes is
// left.
func (c *privateCluster) stop() {
	pids := c.processes()
	if err := c.try("pg_ctl", "-D", c.data, "-w", "-t", "120", "-m", "immediate", "stop"); err != nil && len(pids) > 0 {
		c.t.Error(err)
	}
	// pg_ctl returns once the postmaster removed postmaster.pid, a moment
	// before its process ends: each process gets a few seconds to end (it
	// is no child of ours: /proc is all there is to watch). An exited
	// process whose parent (init, for the postmaster) has not reaped it
	// yet is a zombie: it runs no more.
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for {
			state, ppid := procStat(pid)
			if state == "" || state == "Z" {
				break
			}
			if time.Now().After(deadline) {
				c.t.Errorf("the private cluster's process %d (state %s, parent %s) is left 10s after its stop", pid, state, ppid)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if c.t.Failed() {
		c.t.Logf("the private cluster's log ends:\n%s", c.logTail())
	}
}

// processes returns the postmaster's process ID and its children's, from
// postmaster.pid and /proc.
func (c *privateCluster) processes() []int {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return nil
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pm, err := strconv.Atoi(string(bytes.TrimSpace(line)))
	if err != nil {
		return nil
	}
	pids := []int{pm}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
		if _, ppid := procStat(pid); ppid == strconv.Itoa(pm) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStat returns a process's state and parent's ID, from /proc ("" if
// there is no such process).
func procStat(pid int) (state, ppid string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", ""
	}
	// pid (comm) state ppid ...: comm may hold spaces, not ")".
	i := bytes.LastIndexByte(b, ')')
	if f := strings.Fields(string(b[i+1:])); i >= 0 && len(f) > 1 {
		return f[0], f[1]
	}
	return "", ""
}
