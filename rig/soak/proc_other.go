//go:build !unix

package soak

import (
	"os"
	"syscall"
)

func childAttr() *syscall.SysProcAttr { return nil }

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// quitSignal: without SIGQUIT, a child is killed and prints nothing.
var quitSignal = os.Kill
