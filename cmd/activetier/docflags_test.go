package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// usageFlag matches a flag's line in the usage the flag package prints.
var usageFlag = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)

// TestCommandReferenceFlags requires every flag a subcommand accepts to be
// named, as --flag, in its section of docs/commands.md and of the package
// documentation, so that neither falls behind the code when a flag is
// added.
func TestCommandReferenceFlags(t *testing.T) {
	for _, sc := range subcommands() {
		if sc.name == "help" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			r := runCmd(t, "", "help", sc.name)
			require.Equal(t, exitOK, r.code, r.stderr)
			flags := usageFlag.FindAllStringSubmatch(r.stdout, -1)
			require.NotEmpty(t, flags, "no flags found in the usage of %s:\n%s", sc.name, r.stdout)

			refSection := docSection(t, "../../docs/commands.md", "\n## `activetier "+sc.name+"`\n", "\n## ")
			pkgSection := docSection(t, "doc.go", "\n// # "+sc.name+"\n", "\n// # ")
			for _, m := range flags {
				// Not a longer flag's prefix: --rf is not named by --rf-x.
				flag := regexp.MustCompile(`--` + regexp.QuoteMeta(m[1]) + `([^a-z0-9-]|$)`)
				assert.True(t, flag.MatchString(refSection), "docs/commands.md's section on %s omits --%s", sc.name, m[1])
				assert.True(t, flag.MatchString(pkgSection), "cmd/activetier/doc.go's section on %s omits --%s", sc.name, m[1])
			}
		})
	}
}

// TestCommandReferenceFlagsFinds checks the flag pattern on a usage text of
// the flag package's, so that TestCommandReferenceFlags cannot pass by
// finding no flags.
func TestCommandReferenceFlagsFinds(t *testing.T) {
	usage := "flags:\n  -bucket string\n    \tread KEY from this bucket\n  -json\n    \tprint one JSON object (see -max-bytes)\n  -max-bytes size\n"
	var names []string
	for _, m := range usageFlag.FindAllStringSubmatch(usage, -1) {
		names = append(names, m[1])
	}
	assert.Equal(t, []string{"bucket", "json", "max-bytes"}, names)
}

// docSection returns the part of a file, named relative to this package,
// from start up to the next end or to the end of the file; it fails the
// test if the file or start is missing.
func docSection(t *testing.T, file, start, end string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), start)
	require.True(t, ok, "%s has no %q", file, start)
	rest, _, _ = strings.Cut(rest, end)
	return rest
}
