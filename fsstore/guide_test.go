package fsstore_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGuideSnippet keeps the Go block of docs/writing-a-store.md
// identical to TestConformance, which the compiler checks and go test
// runs.
func TestGuideSnippet(t *testing.T) {
	guide, err := os.ReadFile("../docs/writing-a-store.md")
	require.NoError(t, err)
	src, err := os.ReadFile("conformance_test.go")
	require.NoError(t, err)

	_, block, ok := strings.Cut(string(guide), "```go\n")
	require.True(t, ok, "the guide has no Go block")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok, "the Go block does not end")
	require.Equal(t, 1, strings.Count(string(guide), "```go\n"), "one Go block, the one checked here")

	_, fn, ok := strings.Cut(string(src), "\nfunc TestConformance(")
	require.True(t, ok)
	require.Equal(t, "func TestConformance("+fn, block, "docs/writing-a-store.md's Go block differs from TestConformance in fsstore/conformance_test.go")
}
