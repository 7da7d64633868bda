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
	requireSnippet(t, "## Using the library", "example_test.go")
}

// TestReadmeReaderSnippet keeps the README's direct reader snippet
// identical to the consumer's part of directread's Example, which runs.
func TestReadmeReaderSnippet(t *testing.T) {
	requireSnippet(t, "## Consumers read the active segment directly", "directread/example_test.go")
}

// requireSnippet requires the first Go block of the README's section to
// be the lines of src between its "README snippet" comments, indented
// once in their function.
func requireSnippet(t *testing.T, section, src string) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	code, err := os.ReadFile(src)
	require.NoError(t, err)

	_, text, ok := strings.Cut(string(readme), section+"\n")
	require.True(t, ok, "README has no %q section", section)
	_, block, ok := strings.Cut(text, "```go\n")
	require.True(t, ok, "the section has no Go block")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok, "the Go block does not end")

	_, body, ok := strings.Cut(string(code), "// README snippet begins.\n")
	require.True(t, ok)
	body, _, ok = strings.Cut(body, "\t// README snippet ends.")
	require.True(t, ok)
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	require.Equal(t, strings.Join(lines, "\n"), block, "README.md's snippet differs from %s", src)
}

// TestReadmeBrokerSnippets keeps the Go blocks of the README's "Embedding
// activetier in a broker" section true to the example broker they walk
// through: each must appear, line for line (indentation aside), in one of
// the example's source files, which the compiler checks.
func TestReadmeBrokerSnippets(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "## Embedding activetier in a broker\n")
	require.True(t, ok, "README has no \"Embedding activetier in a broker\" section")
	section, _, _ = strings.Cut(section, "\n## ")

	var sources []string
	for _, f := range []string{"main.go", "broker/broker.go", "broker/cluster.go", "broker/control.go", "broker/handlers.go"} {
		src, err := os.ReadFile("examples/kafkabroker/" + f)
		require.NoError(t, err)
		sources = append(sources, trimLines(string(src)))
	}
	blocks := 0
	for {
		var block string
		_, section, ok = strings.Cut(section, "```go\n")
		if !ok {
			break
		}
		block, section, ok = strings.Cut(section, "```")
		require.True(t, ok, "a Go block does not end")
		blocks++
		want := trimLines(block)
		found := false
		for _, src := range sources {
			found = found || strings.Contains(src, want)
		}
		require.True(t, found, "README block not found in examples/kafkabroker:\n%s", block)
	}
	require.Positive(t, blocks, "the section has no Go block")
}

// trimLines trims every line's surrounding white space.
func trimLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return "\n" + strings.Join(lines, "\n") + "\n"
}
