//go:build unix

package nodeproc

import (
	"bufio"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// CommandT is the part of a test that RunCommand uses.
type CommandT interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

// Command is a command a person would type (an emulator's "go run ..."),
// run in a process group of its own so that Interrupt reaches it as
// Ctrl-C in a terminal would: go run passes SIGINT on to nobody, the
// terminal sends it to the whole group.
type Command struct {
	t      CommandT
	cmd    *exec.Cmd
	lines  chan string
	stderr *SyncBuffer
	done   chan struct{}
	out    []string
}

// RunCommand starts name with args in dir and kills its group at cleanup
// if it is still running.
func RunCommand(t CommandT, dir, name string, args ...string) *Command {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("%v", err)
	}
	c := &Command{t: t, cmd: cmd, lines: make(chan string, 100), stderr: &SyncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	return c
}

// WaitLine returns the lines printed until one that starts with prefix
// (included), failing the test if the command ends first or nothing comes
// within timeout.
func (c *Command) WaitLine(prefix string, timeout time.Duration) []string {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("command ended before printing %q; stdout:\n%s\nstderr:\n%s", prefix, strings.Join(c.out, "\n"), LastLines(c.stderr.String(), 20))
			}
			c.out = append(c.out, l)
			if strings.HasPrefix(l, prefix) {
				return c.out
			}
		case <-deadline:
			c.t.Fatalf("no line %q after %s; stdout:\n%s\nstderr:\n%s", prefix, timeout, strings.Join(c.out, "\n"), LastLines(c.stderr.String(), 20))
		}
	}
}

// Interrupt sends SIGINT to the command's process group and waits for
// the command to exit, failing the test unless it exits within timeout;
// it returns the command's stderr and its error (nil for exit 0).
func (c *Command) Interrupt(timeout time.Duration) (string, error) {
	c.t.Helper()
	if err := syscall.Kill(-c.cmd.Process.Pid, syscall.SIGINT); err != nil {
		c.t.Fatalf("SIGINT: %v", err)
	}
	errc := make(chan error, 1)
	go func() {
		for range c.lines { // drained before Wait, which closes the pipe
		}
		errc <- c.cmd.Wait()
	}()
	select {
	case err := <-errc:
		close(c.done)
		return c.stderr.String(), err
	case <-time.After(timeout):
		c.t.Fatalf("still running %s after SIGINT; stderr:\n%s", timeout, LastLines(c.stderr.String(), 20))
		return "", nil
	}
}

// GroupGone reports whether no process of the command's group is left
// (the emulator's Node child included).
func (c *Command) GroupGone() bool {
	return syscall.Kill(-c.cmd.Process.Pid, 0) == syscall.ESRCH
}
