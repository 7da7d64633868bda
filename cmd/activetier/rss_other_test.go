//go:build !linux

package main

import (
	"context"
	"io"
	"testing"
)

// buildRSSWrap has nothing to build where peak RSS is not measured.
func buildRSSWrap(string) (string, error) { return "", nil }

// runMeasured is runBinary: getrusage's units and inheritance differ
// outside Linux, so maxRSS is -1 and the memory bounds are not asserted.
func runMeasured(ctx context.Context, t *testing.T, stdin io.Reader, env []string, args ...string) binResult {
	t.Helper()
	return runBinary(ctx, t, stdin, env, args...)
}
