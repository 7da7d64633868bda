package activetier_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cores are the protocol cores (and rolecore, the rules of the Node's
// transitions over them): state machines that take events and hand
// out what is to be done in a Ready, as etcd-io/raft's RawNode does. Their
// drivers (walstore, directread and the simulation) do every I/O, keep
// every goroutine and read every clock, so that one core's decisions are
// the same in a test, in the simulation and in production.
var cores = []string{"internal/leadcore", "internal/followcore", "internal/readcore", "internal/rolecore"}

// ioImports are the standard packages through which code reaches files,
// the network, the process or other goroutines, or draws randomness no
// seed replays. A core imports none of them.
var ioImports = []string{
	"crypto/rand", "io/fs", "io/ioutil", "math/rand", "net", "os", "os/exec",
	"os/signal", "runtime", "sync", "sync/atomic", "syscall", "unsafe",
}

// clockCalls are the functions of package time that read the clock or
// wait on it; a core is given the time in each event.
var clockCalls = []string{"After", "AfterFunc", "NewTicker", "NewTimer", "Now", "Since", "Sleep", "Tick", "Until"}

// dependencies are the contracts' interfaces of the store, the metadata log
// and the broker's log: a core that names one could call it.
var dependencies = map[string][]string{
	modulePath + "/storage":  {"LocalLog", "ObjectStore", "RangeReader"},
	modulePath + "/metadata": {"Log"},
}

// TestCoresDoNoIO checks that each protocol core's code starts no
// goroutine, reads no clock, imports nothing that does I/O (and, by
// TestLayout, no store, engine or metadata log), and never names the store,
// metadata-log or local-log interfaces: every call of a dependency is a
// driver's, made for a request the core handed out in a Ready.
//
// A reader can see the same (the grep finding nothing) with
//
//	go list -deps ./internal/leadcore ./internal/followcore ./internal/readcore ./internal/rolecore | grep activetier
//	grep -rnE --include='*.go' --exclude='*_test.go' '^\s*go |time\.(Now|Sleep|After)|storage\.(ObjectStore|LocalLog|RangeReader)|metadata\.Log[^.]' internal/leadcore internal/followcore internal/readcore internal/rolecore
func TestCoresDoNoIO(t *testing.T) {
	var violations []string
	for _, dir := range cores {
		files := coreSources(t, dir)
		require.NotEmpty(t, files, "no sources found in %s", dir)
		violations = append(violations, coreIOViolations(t, files)...)
	}
	assert.Empty(t, violations, "a protocol core does what only its drivers may:\n%s", strings.Join(violations, "\n"))
}

// TestCoresDoNoIOChecker runs the check on a core whose faults are known,
// so that TestCoresDoNoIO cannot pass by finding nothing.
func TestCoresDoNoIOChecker(t *testing.T) {
	bad := `package bad

import (
	"os"
	st "github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/metadata"
	"time"
)

type core struct {
	store st.ObjectStore
	log   metadata.Log
	at    time.Time
}

func (c *core) step(now time.Time) {
	go c.flush()
	c.at = time.Now()
	_ = os.Getenv("X")
	_ = now.Add(time.Second) // a time value is fine
	var _ metadata.Entry     // so is a contract's data type
}

func (c *core) flush() {}
`
	good := `package good

import "time"

func due(now, at time.Time) bool { return !now.Before(at) }
`
	got := coreIOViolations(t, map[string]string{"bad/bad.go": bad, "good/good.go": good})
	assert.Equal(t, []string{
		"bad/bad.go:11: names storage.ObjectStore, a dependency only a driver calls",
		"bad/bad.go:12: names metadata.Log, a dependency only a driver calls",
		"bad/bad.go:17: starts a goroutine",
		"bad/bad.go:18: reads the clock (time.Now)",
		"bad/bad.go:4: imports os",
	}, got)
}

// coreSources returns the non-test Go files of the package in dir, by path.
func coreSources(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	files := map[string]string{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		require.NoError(t, err)
		files[filepath.ToSlash(p)] = string(src)
	}
	return files
}

// coreIOViolations returns, sorted, what the files do that a protocol core
// must not.
func coreIOViolations(t *testing.T, files map[string]string) []string {
	t.Helper()
	var violations []string
	fset := token.NewFileSet()
	for name, src := range files {
		f, err := parser.ParseFile(fset, name, src, 0)
		require.NoError(t, err)
		at := func(n ast.Node, format string, args ...any) {
			violations = append(violations, fmt.Sprintf("%s:%d: ", name, fset.Position(n.Pos()).Line)+fmt.Sprintf(format, args...))
		}
		// local maps the names the file gives its imports to their paths.
		local := map[string]string{}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			require.NoError(t, err)
			if slices.Contains(ioImports, imp) {
				at(spec, "imports %s", imp)
			}
			if spec.Name != nil {
				local[spec.Name.Name] = imp
			} else {
				local[imp[strings.LastIndex(imp, "/")+1:]] = imp
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				at(n, "starts a goroutine")
			case *ast.SelectorExpr:
				x, ok := n.X.(*ast.Ident)
				if !ok {
					break
				}
				pkg := local[x.Name]
				if pkg == "time" && slices.Contains(clockCalls, n.Sel.Name) {
					at(n, "reads the clock (time.%s)", n.Sel.Name)
				}
				if slices.Contains(dependencies[pkg], n.Sel.Name) {
					at(n, "names %s.%s, a dependency only a driver calls", pkg[strings.LastIndex(pkg, "/")+1:], n.Sel.Name)
				}
			}
			return true
		})
	}
	slices.Sort(violations)
	return violations
}
