//go:build !linux

package main

// peakRSS is 0 where the peak resident set is not measured.
func peakRSS() int64 { return 0 }

// resetPeakRSS does nothing where the peak resident set is not measured.
func resetPeakRSS() bool { return false }
