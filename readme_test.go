package activetier_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeSnippet keeps the README's library snippet identical to the
// body of Example_broker, which the compiler checks.
func TestReadmeSnippet(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)

	_, section, ok := strings.Cut(string(readme), "## Using the library")
	require.True(t, ok, "README has no \"Using the library\" section")
	_, block, ok := strings.Cut(section, "```go\n")
	require.True(t, ok, "the section has no Go block")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok, "the Go block does not end")

	_, body, ok := strings.Cut(string(src), "// README snippet begins.\n")
	require.True(t, ok)
	body, _, ok = strings.Cut(body, "\t// README snippet ends.")
	require.True(t, ok)
	// The example is indented once, inside its function.
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	require.Equal(t, strings.Join(lines, "\n"), block, "README.md's snippet differs from Example_broker in example_test.go")
}
