package fsstore_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// mkdir creates dir and returns it.
func mkdir(t *testing.T, dir string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}
