//go:build !linux

package main

import "os"

// peakRSS is unknown outside Linux, where getrusage's units differ.
func peakRSS(*os.ProcessState) int64 { return -1 }
