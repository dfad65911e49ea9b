//go:build unix

package soak

import "syscall"

// childAttr puts a child in a process group of its own, which killGroup
// kills as a whole.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends SIGKILL to the process group led by pid.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }

// quitSignal makes a Go child print every goroutine's stack and exit.
var quitSignal = syscall.SIGQUIT
