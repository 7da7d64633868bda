package activetier_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
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

// TestReadmeSetUp keeps the README's set-up to the two commands a
// newcomer runs: the demo on memstore, and the whole test suite.
func TestReadmeSetUp(t *testing.T) {
	section := between(t, readFile(t, "README.md"), "## Set up\n", "\n## ")
	block := between(t, section, "```sh\n", "```")
	var commands []string
	for _, line := range strings.Split(block, "\n") {
		command, _, _ := strings.Cut(line, "#")
		if command = strings.TrimSpace(command); command != "" {
			commands = append(commands, command)
		}
	}
	require.Equal(t, []string{"go run ./cmd/activetier demo", "bash scripts/test.sh"}, commands)
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

// TestReadmeLinks requires every relative link of README.md and
// docs/*.md to name a file or directory of the repository and, with a
// #fragment, a heading of the Markdown file it names (as GitHub makes
// anchors of headings), and every page in docs/ to be linked from the
// README, so that a reader can find it.
func TestReadmeLinks(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	linkedFromReadme := map[string]bool{}
	for _, doc := range append([]string{"README.md"}, docs...) {
		for _, link := range markdownLinks(readFile(t, doc)) {
			if isExternal(link) {
				continue
			}
			target, fragment, _ := strings.Cut(link, "#")
			file := doc
			if target != "" {
				file = path.Join(path.Dir(doc), target)
			}
			if doc == "README.md" {
				linkedFromReadme[file] = true
			}
			_, err := os.Stat(file)
			if !assert.NoError(t, err, "%s links to %q: no such file", doc, link) || fragment == "" {
				continue
			}
			if !assert.True(t, strings.HasSuffix(file, ".md"), "%s links to %q: an anchor in a file that is not Markdown", doc, link) {
				continue
			}
			assert.Contains(t, headingAnchors(readFile(t, file)), fragment, "%s links to %q: %s has no such heading", doc, link, file)
		}
	}
	for _, doc := range docs {
		assert.True(t, linkedFromReadme[filepath.ToSlash(doc)], "README.md does not link to %s", doc)
	}
}

// TestReadmeLinksChecker checks the link checker's parts on cases whose
// answer is known, so that TestReadmeLinks cannot pass by finding nothing.
func TestReadmeLinksChecker(t *testing.T) {
	links := markdownLinks("See [a](docs/a.md), [`b`](b#c \"title\") and ![img](x.png).\n" +
		"Code: `[not](a link)`.\n```\n[nor](this)\n```\n[web](https://example.com)\n")
	require.Equal(t, []string{"docs/a.md", "b#c", "x.png", "https://example.com"}, links)
	require.True(t, isExternal("https://example.com"))
	require.False(t, isExternal("docs/a.md"))

	anchors := headingAnchors("# Title\n## `activetier cost`\n## The scaling table: `activetier bench`\n" +
		"```\n# not a heading\n```\n## Data flow\n## Data flow\n### On an S3-compatible server\n")
	require.Equal(t, []string{"title", "activetier-cost", "the-scaling-table-activetier-bench",
		"data-flow", "data-flow-1", "on-an-s3-compatible-server"}, anchors)
}

var (
	fence    = regexp.MustCompile("(?ms)^```.*?^```[ \t]*$")
	codeSpan = regexp.MustCompile("`[^`\n]*`")
	mdLink   = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
)

// markdownLinks returns the targets of the links and images of a Markdown
// text, outside code blocks and code spans, in order.
func markdownLinks(text string) []string {
	text = fence.ReplaceAllString(text, "")
	text = codeSpan.ReplaceAllString(text, "``")
	var links []string
	for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
		links = append(links, m[1])
	}
	return links
}

// isExternal reports whether a link leaves the repository.
func isExternal(link string) bool {
	for _, scheme := range []string{"http://", "https://", "mailto:"} {
		if strings.HasPrefix(link, scheme) {
			return true
		}
	}
	return false
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: lower case, punctuation dropped, spaces as hyphens, and
// "-1", "-2", ... after a repeated one.
func headingAnchors(text string) []string {
	text = fence.ReplaceAllString(text, "")
	seen := map[string]int{}
	var anchors []string
	for _, line := range strings.Split(text, "\n") {
		title := strings.TrimLeft(line, "#")
		if title == line || !strings.HasPrefix(title, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			seen[anchor]++
			anchor += "-" + strconv.Itoa(n)
		} else {
			seen[anchor] = 1
		}
		anchors = append(anchors, anchor)
	}
	return anchors
}

// TestReadmePackageTable requires the README's package table to list
// every package of the module, each linked to its directory.
func TestReadmePackageTable(t *testing.T) {
	table := between(t, readFile(t, "README.md"), "## Packages\n", "\n## ")

	var packages []string
	seen := map[string]bool{}
	for _, p := range goFiles(t) {
		if dir := filepath.ToSlash(filepath.Dir(p)); !strings.HasSuffix(p, "_test.go") && !seen[dir] {
			seen[dir] = true
			packages = append(packages, dir)
		}
	}
	require.Contains(t, packages, "walstore", "the walk found no packages")
	for _, p := range packages {
		row := "| [`" + p + "`](" + p + ") |"
		if p == "." {
			row = "| [`activetier`](doc.go) |"
		}
		assert.True(t, strings.Contains(table, row), "README's package table does not list %s", p)
	}
}

// TestReadmeCommands requires every subcommand of cmd/activetier to be
// documented wherever the commands are listed: the command reference
// (docs/commands.md), the command's package documentation, the root
// package's map and the README's package table.
func TestReadmeCommands(t *testing.T) {
	list := between(t, readFile(t, "cmd/activetier/main.go"), "func subcommands() []subcommand {", "\n}\n")
	var names []string
	for _, m := range regexp.MustCompile(`\{"(\w+)", "`).FindAllStringSubmatch(list, -1) {
		names = append(names, m[1])
	}
	require.Contains(t, names, "demo", "no subcommands found in cmd/activetier/main.go")

	reference := readFile(t, "docs/commands.md")
	cmdDoc := readFile(t, "cmd/activetier/doc.go")
	rootLine := between(t, readFile(t, "doc.go"), "//   - cmd/activetier:", "//   - ")
	readmeRow := between(t, readFile(t, "README.md"), "| [`cmd/activetier`](cmd/activetier) |", "\n")
	for _, name := range names {
		assert.True(t, strings.Contains(reference, "\n## `activetier "+name+"`\n"), "docs/commands.md has no section for %s", name)
		if name == "help" {
			continue
		}
		assert.True(t, strings.Contains(cmdDoc, "\n// # "+name+"\n"), "cmd/activetier/doc.go has no section for %s", name)
		assert.Regexp(t, `\b`+name+`\b`, rootLine, "doc.go's line for cmd/activetier omits %s", name)
		assert.Contains(t, readmeRow, "`"+name+"`", "README's row for cmd/activetier omits %s", name)
	}
}

// between returns the part of text after start, up to end or, if end does
// not follow, to the end of text. It fails the test if start is missing.
func between(t *testing.T, text, start, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(text, start)
	require.True(t, ok, "%q not found", start)
	rest, _, _ = strings.Cut(rest, end)
	return rest
}

// readFile returns a file of the repository as a string.
func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(b)
}

// goFiles returns the Go files of the module, in lexical order, leaving
// out hidden directories and testdata as the go command does.
func goFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			files = append(files, p)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}
