package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/wary-go/wary/broker"
)

// worker is one running consumer or relay: a child process, or a goroutine
// for targets whose broker lives in this process.
type worker struct {
	spec workerSpec

	cmd   *exec.Cmd
	stdin io.WriteCloser

	cancel context.CancelFunc
	mu     sync.Mutex
	closer io.Closer // the goroutine's subscription or topic

	done     chan struct{}
	err      error
	stopped  bool // killed or terminated on purpose
	sigkill  bool // a process that died of SIGKILL
	stderrAt string
}

// startWorker starts spec as a child process of exe with env added to its
// environment, or, when mux is not nil, as a goroutine opening its URL on
// mux (env is then the caller's business).
func startWorker(spec workerSpec, exe string, env []string, mux *broker.URLMux) (*worker, error) {
	w := &worker{spec: spec, done: make(chan struct{})}
	if mux != nil {
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel = cancel
		go func() {
			defer close(w.done)
			w.err = runWorker(ctx, spec, mux, func(c io.Closer) {
				w.mu.Lock()
				defer w.mu.Unlock()
				w.closer = c
			})
		}()
		return w, nil
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	w.stderrAt = filepath.Join(filepath.Dir(spec.Log), spec.Name+".stderr")
	errf, err := os.Create(w.stderrAt)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), env...), ChildEnv+"="+string(js))
	cmd.Stdout, cmd.Stderr = errf, errf
	cmd.SysProcAttr = childAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		errf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		errf.Close()
		return nil, err
	}
	w.cmd, w.stdin = cmd, stdin
	go func() {
		defer close(w.done)
		w.err = cmd.Wait()
		errf.Close()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			w.sigkill = true
		}
	}()
	return w, nil
}

// kill stops the worker as abruptly as it can: SIGKILL to the process
// group, or, for a goroutine, closing its subscription or topic without
// settling and canceling it.
func (w *worker) kill() {
	w.mu.Lock()
	w.stopped = true
	c := w.closer
	w.mu.Unlock()
	if w.cmd != nil {
		killGroup(w.cmd.Process.Pid)
		return
	}
	if c != nil {
		_ = c.Close()
	}
	w.cancel()
}

func (w *worker) markStopped() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
}

// term asks the worker to stop cleanly (SIGTERM, or cancel).
func (w *worker) term() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	if w.cmd != nil {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		return
	}
	w.cancel()
}

// exited reports whether the worker has ended.
func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// unexpected reports whether the worker ended without being asked to.
func (w *worker) unexpected() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exited() && !w.stopped
}

// failure describes how the worker ended, with the end of its stderr.
func (w *worker) failure() string {
	s := fmt.Sprintf("%s: %v", w.spec.Name, w.err)
	if w.stderrAt != "" {
		if b, err := os.ReadFile(w.stderrAt); err == nil {
			if len(b) > 2000 {
				b = b[len(b)-2000:]
			}
			s += "\n" + string(b)
		}
	}
	return s
}

// cleanEnd reports whether the worker ended without error after term.
func (w *worker) cleanEnd() bool {
	<-w.done
	return w.err == nil || errors.Is(w.err, context.Canceled)
}
