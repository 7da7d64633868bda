package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// result is what one invocation of the command printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// runCmd runs the command as main does, with buffers for its streams.
func runCmd(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}
