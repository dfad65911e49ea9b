package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pgCPU returns a function giving the CPU time (user and system) the
// PostgreSQL server behind pool has used so far, read from /proc: its
// postmaster's, its exited processes' (the postmaster's cutime and
// cstime) and its running processes' (backends, WAL senders, autovacuum,
// the writers), whoever their clients are. Take differences. It returns
// nil, and logs why, when the server is not on this machine (postmaster.pid
// in SHOW data_directory cannot be read). The copy in bench/peers
// (pgcpu.go) is the same reading.
func pgCPU(tb testing.TB, pool *pgxpool.Pool) func() time.Duration {
	tb.Helper()
	return serverCPU(tb, pool, false)
}

// walSenderCPU is pgCPU of the server's live WAL senders alone (read it
// before a stream closes: a WAL sender that exited counts no more).
func walSenderCPU(tb testing.TB, pool *pgxpool.Pool) func() time.Duration {
	tb.Helper()
	return serverCPU(tb, pool, true)
}

func serverCPU(tb testing.TB, pool *pgxpool.Pool, walSenders bool) func() time.Duration {
	tb.Helper()
	var dir string
	if err := pool.QueryRow(context.Background(), "SHOW data_directory").Scan(&dir); err != nil {
		tb.Logf("PostgreSQL CPU: n/a (data directory: %v)", err)
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		tb.Logf("PostgreSQL CPU: n/a (%v)", err)
		return nil
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(line))
	if err == nil {
		_, _, err = procTicks(pm)
	}
	if err != nil {
		tb.Logf("PostgreSQL CPU: n/a (postmaster: %v)", err)
		return nil
	}
	return func() time.Duration {
		var ticks int64
		if !walSenders {
			_, t, err := procTicks(pm)
			if err != nil {
				tb.Fatalf("PostgreSQL CPU: %v", err)
			}
			ticks = t
		}
		ents, err := os.ReadDir("/proc")
		if err != nil {
			tb.Fatalf("PostgreSQL CPU: %v", err)
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == pm {
				continue
			}
			if walSenders {
				if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || !isWALSender(string(cmd)) {
					continue
				}
			}
			if ppid, t, err := procTicks(pid); err == nil && ppid == pm {
				ticks += t
			}
		}
		return time.Duration(ticks) * time.Second / 100 // USER_HZ
	}
}

// isWALSender reports whether a server process's title (its
// /proc/<pid>/cmdline) is a WAL sender's: "postgres: walsender ...", or
// "postgres: <cluster_name>: walsender ..." when cluster_name is set (as
// Debian's clusters set it: "15/main").
func isWALSender(title string) bool {
	rest, ok := strings.CutPrefix(title, "postgres: ")
	if !ok {
		return false
	}
	if _, after, ok := strings.Cut(rest, ": "); ok && !strings.HasPrefix(rest, "walsender") {
		rest = after
	}
	return strings.HasPrefix(rest, "walsender ")
}

// procTicks reads /proc/<pid>/stat: the parent's PID, and utime + stime +
// cutime + cstime (its own CPU and its reaped children's) in clock ticks.
func procTicks(pid int) (ppid int, ticks int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // from field 3, the state; comm may hold spaces
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ppid, err = strconv.Atoi(f[1])
	for _, x := range f[11:15] { // utime, stime, cutime, cstime
		n, perr := strconv.ParseInt(x, 10, 64)
		ticks += n
		err = errors.Join(err, perr)
	}
	return ppid, ticks, err
}

// TestIsWALSender: WAL senders' titles with and without a cluster name.
func TestIsWALSender(t *testing.T) {
	for title, want := range map[string]bool{
		"postgres: walsender postgres 127.0.0.1(50152) START_REPLICATION":          true,
		"postgres: 15/main: walsender postgres 127.0.0.1(50152) START_REPLICATION": true,
		"postgres: 15/main: postgres test 127.0.0.1(51954) idle":                   false,
		"postgres: postgres test 127.0.0.1(51954) SELECT walsender ":               false,
		"postgres: 15/main: checkpointer ":                                         false,
	} {
		if got := isWALSender(title); got != want {
			t.Errorf("isWALSender(%q) = %v, want %v", title, got, want)
		}
	}
}

// TestPgCPU: a query that keeps a backend busy shows in the server's CPU.
func TestPgCPU(t *testing.T) {
	pool := newPool(t)
	cpu := pgCPU(t, pool)
	if cpu == nil {
		t.Skip("PostgreSQL is not on this machine")
	}
	before := cpu()
	if _, err := pool.Exec(t.Context(), `SELECT count(*) FROM generate_series(1, 3000000)`); err != nil {
		t.Fatal(err)
	}
	if used := cpu() - before; used <= 0 {
		t.Errorf("PostgreSQL CPU over a 3,000,000-row query: %v", used)
	}
}

// brokerCPU returns a function giving the CPU time the local RabbitMQ's
// processes (beam.smp) have used so far, or nil, logging why, when none
// runs on this machine.
func brokerCPU(tb testing.TB) func() time.Duration {
	tb.Helper()
	pids := func() (ps []int) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if b, err := os.ReadFile("/proc/" + e.Name() + "/comm"); err == nil && strings.TrimSpace(string(b)) == "beam.smp" {
				pid, _ := strconv.Atoi(e.Name())
				ps = append(ps, pid)
			}
		}
		return ps
	}
	if len(pids()) == 0 {
		tb.Logf("RabbitMQ CPU: n/a (no beam.smp process on this machine)")
		return nil
	}
	return func() time.Duration {
		var ticks int64
		for _, pid := range pids() {
			if _, t, err := procTicks(pid); err == nil {
				ticks += t
			}
		}
		return time.Duration(ticks) * time.Second / 100 // USER_HZ
	}
}
