package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// buildRSSWrap builds testdata/rsswrap, through which runMeasured runs the
// command, into dir.
func buildRSSWrap(dir string) (string, error) {
	path := filepath.Join(dir, "rsswrap")
	out, err := exec.Command("go", "build", "-o", path, "./testdata/rsswrap").CombinedOutput()
	if err != nil {
		return "", &buildError{err: err, out: out}
	}
	return path, nil
}

// runMeasured is runBinary with the command's own peak resident set in
// maxRSS, measured by rsswrap.
func runMeasured(ctx context.Context, t *testing.T, stdin io.Reader, env []string, args ...string) binResult {
	t.Helper()
	out := filepath.Join(t.TempDir(), "rss")
	env = append(env, "RSSWRAP_OUT="+out)
	r := runCommand(ctx, t, rssWrapPath, stdin, env, append([]string{binPath}, args...)...)
	kib, err := os.ReadFile(out)
	require.NoError(t, err, "rsswrap wrote no measurement: %s", r.stderr)
	n, err := strconv.ParseInt(string(kib), 10, 64)
	require.NoError(t, err)
	r.maxRSS = n << 10 // getrusage gives KiB on Linux
	return r
}
