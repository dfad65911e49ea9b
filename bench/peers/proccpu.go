package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procCPU is the CPU time used so far by this process (the producers, the
// relay or forwarder and the consumer of every contender run in it) and
// by the local RabbitMQ's processes (beam.smp; -1: none on this machine).
type procCPU struct{ self, broker time.Duration }

// readProcCPU reads procCPU now.
func readProcCPU() procCPU {
	p := procCPU{broker: -1}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		p.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return p
	}
	var ticks int64
	found := false
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/comm"); err != nil || strings.TrimSpace(string(b)) != "beam.smp" {
			continue
		}
		if st, err := procStat(pid); err == nil {
			ticks += st.utime + st.stime
			found = true
		}
	}
	if found {
		p.broker = time.Duration(ticks) * time.Second / clockTicks
	}
	return p
}

// since fills r's GoCPU and BrokerCPU with what was used since p.
func (p procCPU) since(r Result) Result {
	now := readProcCPU()
	r.GoCPU, r.BrokerCPU = now.self-p.self, -1
	if p.broker >= 0 && now.broker >= 0 {
		r.BrokerCPU = now.broker - p.broker
	}
	return r
}
