//go:build unix

package combiner

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the test process has used, user and
// system, on all threads.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
