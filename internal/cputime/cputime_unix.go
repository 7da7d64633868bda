//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time, user and system, the process has used on
// all its threads, and false if it cannot be read.
func Process() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
