package fsstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/fsstore"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

// TestConformance is docs/writing-a-store.md's example of running
// storagetest on a store; TestGuideSnippet keeps the two identical.
func TestConformance(t *testing.T) {
	storagetest.Run(t, storagetest.HarnessFunc(func(ctx context.Context, t *testing.T) (local, peer storage.ObjectStore) {
		// Two AZs, each bucket a fresh directory; each store writes to
		// its own AZ's and reads both.
		root := t.TempDir()
		opts := fsstore.Options{Buckets: map[string]fsstore.Bucket{
			"az1": {Name: "bucket-az1", Dir: filepath.Join(root, "az1")},
			"az2": {Name: "bucket-az2", Dir: filepath.Join(root, "az2")},
		}}
		for _, b := range opts.Buckets {
			require.NoError(t, os.Mkdir(b.Dir, 0o755))
		}
		opts.LocalAZ = "az1"
		local, err := fsstore.New(opts)
		require.NoError(t, err)
		opts.LocalAZ = "az2"
		peer, err = fsstore.New(opts)
		require.NoError(t, err)
		return local, peer
	}))
}
