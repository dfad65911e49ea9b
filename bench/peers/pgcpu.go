package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ: 100
// on Linux).
const clockTicks = 100

// pgCPU reads the CPU time used by a PostgreSQL server running on this
// machine: its postmaster's, that of its processes that exited (which the
// postmaster reaped: its cutime and cstime) and that of its processes
// running now (backends, WAL senders, autovacuum, the writers). It counts
// the whole server, whoever its clients are.
type pgCPU struct{ pid int }

// localPostgres finds the postmaster of conn's server: the first line of
// postmaster.pid in its data directory (SHOW data_directory needs a
// superuser or pg_read_all_settings). It fails when the server is not on
// this machine or the file cannot be read.
func localPostgres(ctx context.Context, conn *pgx.Conn) (*pgCPU, error) {
	var dir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return nil, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return nil, fmt.Errorf("postmaster.pid: %w", err)
	}
	st, err := procStat(pid)
	if err != nil {
		return nil, err
	}
	if st.comm != "postgres" && st.comm != "postmaster" {
		return nil, fmt.Errorf("process %d is %q, not the postmaster", pid, st.comm)
	}
	return &pgCPU{pid: pid}, nil
}

// usedBy returns the CPU time the server has used so far by kind of
// process, read from its process title: "walsender" (the streaming
// relay's logical decoding), "client" (backends of client connections:
// producers, relays, consumers), "autovacuum", and "other" (the
// postmaster, the writers and checkpointer, and processes that exited).
func (p *pgCPU) usedBy() (map[string]time.Duration, error) {
	pm, err := procStat(p.pid)
	if err != nil {
		return nil, err
	}
	by := map[string]int64{"other": pm.utime + pm.stime + pm.cutime + pm.cstime}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procStat(pid); err == nil && st.ppid == p.pid {
			by[processKind(pid)] += st.utime + st.stime
		}
	}
	out := make(map[string]time.Duration, len(by))
	for k, ticks := range by {
		out[k] = time.Duration(ticks) * time.Second / clockTicks
	}
	return out, nil
}

// processKind tells a server process's kind by its title (see usedBy).
func processKind(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	title := strings.TrimRight(string(b), "\x00")
	switch {
	case strings.Contains(title, "walsender"):
		return "walsender"
	case strings.Contains(title, "autovacuum"):
		return "autovacuum"
	case strings.Contains(title, "(") || strings.Contains(title, "[local]"):
		return "client"
	}
	return "other"
}

// stat is what pgCPU reads of /proc/<pid>/stat.
type stat struct {
	comm                         string
	ppid                         int
	utime, stime, cutime, cstime int64
}

func procStat(pid int) (stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	return parseStat(string(b))
}

// parseStat parses a /proc/<pid>/stat line: "pid (comm) state ppid ...",
// utime, stime, cutime and cstime its 14th to 17th fields. comm may hold
// spaces and parentheses: it ends at the last ')'.
func parseStat(s string) (stat, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return stat{}, errors.New("/proc stat: no command")
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return stat{}, errors.New("/proc stat: short")
	}
	st := stat{comm: s[open+1 : end]}
	var err error
	st.ppid, err = strconv.Atoi(f[1])
	for i, p := range []*int64{&st.utime, &st.stime, &st.cutime, &st.cstime} {
		if err != nil {
			break
		}
		*p, err = strconv.ParseInt(f[11+i], 10, 64)
	}
	if err != nil {
		return stat{}, fmt.Errorf("/proc stat: %w", err)
	}
	return st, nil
}
