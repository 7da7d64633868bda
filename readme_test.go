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
	requireSnippet(t, "README.md", "## Using the library", "example_test.go")
}

// TestReadmeReaderSnippet keeps the direct reader snippet of
// docs/direct-reads.md identical to the consumer's part of directread's
// Example, which runs.
func TestReadmeReaderSnippet(t *testing.T) {
	requireSnippet(t, "docs/direct-reads.md", "## Reading", "directread/example_test.go")
}

// requireSnippet requires the first Go block of doc's section to be the
// lines of src between its "README snippet" comments, indented once in
// their function.
func requireSnippet(t *testing.T, doc, section, src string) {
	t.Helper()
	text := readFile(t, doc)
	code := readFile(t, src)

	_, text, ok := strings.Cut(text, section+"\n")
	require.True(t, ok, "%s has no %q section", doc, section)
	_, block, ok := strings.Cut(text, "```go\n")
	require.True(t, ok, "the section has no Go block")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok, "the Go block does not end")

	_, body, ok := strings.Cut(code, "// README snippet begins.\n")
	require.True(t, ok)
	body, _, ok = strings.Cut(body, "\t// README snippet ends.")
	require.True(t, ok)
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	require.Equal(t, strings.Join(lines, "\n"), block, "%s's snippet differs from %s", doc, src)
}

// TestReadmeBrokerSnippets keeps the Go blocks of docs/kafkabroker.md true
// to the example broker they walk through: each must appear, line for line
// (indentation aside), in one of the example's source files, which the
// compiler checks.
func TestReadmeBrokerSnippets(t *testing.T) {
	section := readFile(t, "docs/kafkabroker.md")
	var sources []string
	for _, f := range []string{"main.go", "broker/broker.go", "broker/cluster.go", "broker/control.go", "broker/handlers.go"} {
		sources = append(sources, trimLines(readFile(t, "examples/kafkabroker/"+f)))
	}
	blocks := 0
	for {
		var block string
		var ok bool
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
		require.True(t, found, "docs/kafkabroker.md block not found in examples/kafkabroker:\n%s", block)
	}
	require.Positive(t, blocks, "docs/kafkabroker.md has no Go block")
}

// trimLines trims every line's surrounding white space.
func trimLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return "\n" + strings.Join(lines, "\n") + "\n"
}

// readFile returns a file of the repository as a string.
func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(b)
}
