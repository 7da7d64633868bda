package fsstore_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/fsstore"
)

// mkdir creates dir and returns it.
func mkdir(t testing.TB, dir string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// twoAZs returns the options of a deployment with two AZs, each bucket a
// fresh directory, for a broker in az.
func twoAZs(t testing.TB, az string) fsstore.Options {
	t.Helper()
	root := t.TempDir()
	return fsstore.Options{
		Buckets: map[string]fsstore.Bucket{
			"az1": {Name: "bucket-az1", Dir: mkdir(t, filepath.Join(root, "az1"))},
			"az2": {Name: "bucket-az2", Dir: mkdir(t, filepath.Join(root, "az2"))},
		},
		LocalAZ: az,
	}
}

// peerOf returns opts for a broker in another AZ of the same deployment.
func peerOf(opts fsstore.Options, az string) fsstore.Options {
	opts.LocalAZ = az
	return opts
}

func newStore(t testing.TB, opts fsstore.Options) *fsstore.Store {
	t.Helper()
	s, err := fsstore.New(opts)
	require.NoError(t, err)
	return s
}
