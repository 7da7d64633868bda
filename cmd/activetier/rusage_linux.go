package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// peakRSS returns the process's peak resident set in bytes since it
// started or since resetPeakRSS, from VmHWM in /proc/self/status; 0 if it
// cannot be read.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:"))
		if !ok {
			continue
		}
		kib, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
		if err != nil {
			return 0
		}
		return kib << 10
	}
	return 0
}

// resetPeakRSS starts peakRSS over from the current resident set (Linux's
// clear_refs "5"), so that one run of a bench grid is measured on its own.
// It reports whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}
