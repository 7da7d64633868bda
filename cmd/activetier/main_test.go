package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// binary is the command built once by TestMain, for the tests that run it
// as a user does: its exit code, its streams and its memory are the
// process's own. It is built without the race detector, which would
// multiply the memory the tests measure.
var binPath string

// rssWrapPath is testdata/rsswrap, built by TestMain on Linux (see
// runMeasured).
var rssWrapPath string

// buildError is a failed go build with its output.
type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return fmt.Sprintf("%v\n%s", e.err, e.out) }

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "activetier-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "activetier")
	if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the command: %v\n%s", err, out)
		return 1
	}
	if rssWrapPath, err = buildRSSWrap(dir); err != nil {
		fmt.Fprintf(os.Stderr, "building rsswrap: %v\n", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
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

// binResult is what one run of the built binary printed, returned, and
// used of memory.
type binResult struct {
	result
	// maxRSS is the process's peak resident set in bytes (runMeasured, on
	// Linux); -1 where it is not measured.
	maxRSS int64
}

// runBinary runs the built command with args, stdin (nil: none) and env
// added to the test's environment, until it exits or ctx ends (then it is
// killed). Its maxRSS is -1: see runMeasured.
func runBinary(ctx context.Context, t *testing.T, stdin io.Reader, env []string, args ...string) binResult {
	t.Helper()
	return runCommand(ctx, t, binPath, stdin, env, args...)
}

func runCommand(ctx context.Context, t *testing.T, path string, stdin io.Reader, env []string, args ...string) binResult {
	t.Helper()
	cmd := exec.CommandContext(ctx, path, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errOut
	cmd.Env = append(os.Environ(), env...)
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return binResult{result: result{stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode()}, maxRSS: -1}
}
