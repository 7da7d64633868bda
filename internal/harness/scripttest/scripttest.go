package scripttest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// Run plays every testdata/*.txt script of the package under test as a
// subtest named after the file, each with a handler newHandler makes
// afresh: the handler runs one command and returns its output.
func Run(t *testing.T, newHandler func() func(*testing.T, *datadriven.TestData) string) {
	t.Helper()
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no scripts in testdata/*.txt")
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			datadriven.RunTest(t, path, newHandler())
		})
	}
}
