package activetier_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modulePath is the import path of the module's root package.
const modulePath = "github.com/activetier/activetier"

// harnessDir holds the internal packages only tests, the demo's tests and
// the examples' tests import; everything else under internal/ is on the
// library's floor.
const harnessDir = "internal/harness/"

// assemblyDirs hold the internal packages that wire the library's engines
// into a whole (a cluster of brokers and its controller) for cmd/ and the
// harnesses: they may import the library, and no library package may
// import them.
var assemblyDirs = []string{"internal/cluster"}

// contracts are the packages outside internal/ that the library-floor
// internal packages may build on: the contracts and the format, which do
// no I/O and know no engine or store.
var contracts = []string{"metadata", "storage", "fencing", "combiner", "digest"}

// pkgImports is what one package of the module imports of the module,
// each import as a directory relative to the module's root.
type pkgImports struct {
	code  []string // from its non-test files
	tests []string // from its _test.go files
}

// TestLayout keeps internal/ in its three floors: the library floor (the
// protocol cores and the helpers the library builds on), the assemblies
// (internal/cluster: the library wired into a cluster, for cmd/ and the
// harnesses) and internal/harness (what only tests import), so that an
// import never runs from the library up into an assembly or a harness and
// a folder's name says which floor a package is on.
func TestLayout(t *testing.T) {
	pkgs := moduleImports(t)
	require.Contains(t, pkgs, "internal/leadcore", "the walk found no internal packages")
	require.Contains(t, pkgs, harnessDir+"sim", "the walk found no harness packages")
	require.Contains(t, pkgs, assemblyDirs[0], "the walk found no assemblies")
	require.Contains(t, pkgs["walstore"].code, "internal/leadcore", "the walk found no imports")
	violations := layoutViolations(pkgs)
	assert.Empty(t, violations, "the floors of internal/ are broken:\n%s", strings.Join(violations, "\n"))
}

// TestLayoutChecker checks layoutViolations on a layout whose faults are
// known, so that TestLayout cannot pass by finding nothing.
func TestLayoutChecker(t *testing.T) {
	pkgs := map[string]pkgImports{
		"storage":                 {},
		"memstore":                {code: []string{"storage"}},
		"walstore":                {code: []string{"internal/core", "storage"}, tests: []string{harnessDir + "cluster"}},
		"cmd/tool":                {code: []string{"walstore", harnessDir + "cluster"}},
		"internal/core":           {code: []string{"storage", "internal/util"}, tests: []string{harnessDir + "script"}},
		"internal/util":           {},
		"internal/bad":            {code: []string{"memstore", harnessDir + "script"}},
		"internal/unused":         {},
		"internal/cluster":        {code: []string{"walstore", "memstore", "internal/core"}},
		"internal/core/wired":     {code: []string{"internal/cluster"}},
		"directread":              {code: []string{"storage", "internal/cluster"}},
		"cmd/demo":                {code: []string{"internal/cluster"}},
		harnessDir + "cluster":    {code: []string{"walstore", "memstore", "internal/core", "internal/cluster"}},
		harnessDir + "script":     {},
		harnessDir + "inharness":  {code: []string{"internal/unused"}},
		harnessDir + "only/tests": {tests: []string{"internal/unused"}},
	}
	require.Equal(t, []string{
		"cmd/tool imports " + harnessDir + "cluster, a harness: only tests may import a harness",
		"directread imports internal/cluster, an assembly: only cmd/, internal/harness and other assemblies may import an assembly",
		"internal/bad imports " + harnessDir + "script, a harness: only tests may import a harness",
		"internal/bad imports memstore: a library-floor internal package imports only metadata, storage, fencing, combiner, digest and the library floor of internal/",
		"internal/bad is imported by no library code: a package only tests use belongs under " + harnessDir,
		"internal/core/wired imports internal/cluster, an assembly: only cmd/, internal/harness and other assemblies may import an assembly",
		"internal/core/wired is imported by no library code: a package only tests use belongs under " + harnessDir,
		"internal/unused is imported by no library code: a package only tests use belongs under " + harnessDir,
	}, layoutViolations(pkgs))
}

// layoutViolations returns, sorted, every import of pkgs that breaks the
// floors of internal/: a library-floor internal package imports only the
// contracts and other library-floor packages (never a harness, an
// assembly, an engine or a store); only cmd/, internal/harness and other
// assemblies import an assembly; no package's non-test code outside
// internal/harness imports a harness; and every library-floor package and
// assembly is imported by some non-test code outside internal/harness, or
// it would be a harness.
func layoutViolations(pkgs map[string]pkgImports) []string {
	var violations []string
	usedByLibrary := map[string]bool{}
	for dir, p := range pkgs {
		if isHarness(dir) {
			continue
		}
		for _, imp := range p.code {
			usedByLibrary[imp] = true
			if isHarness(imp) {
				violations = append(violations, dir+" imports "+imp+", a harness: only tests may import a harness")
			} else if isAssembly(imp) && !isAssembly(dir) && !strings.HasPrefix(dir, "cmd/") {
				violations = append(violations, dir+" imports "+imp+", an assembly: only cmd/, internal/harness and other assemblies may import an assembly")
			} else if isLibraryFloor(dir) && !isLibraryFloor(imp) && !slices.Contains(contracts, imp) {
				violations = append(violations, dir+" imports "+imp+": a library-floor internal package imports only "+
					strings.Join(contracts, ", ")+" and the library floor of internal/")
			}
		}
	}
	for dir := range pkgs {
		if (isLibraryFloor(dir) || isAssembly(dir)) && !usedByLibrary[dir] {
			violations = append(violations, dir+" is imported by no library code: a package only tests use belongs under "+harnessDir)
		}
	}
	slices.Sort(violations)
	return violations
}

// isHarness reports whether the package in dir is a harness.
func isHarness(dir string) bool { return strings.HasPrefix(dir, harnessDir) }

// isAssembly reports whether the package in dir is an assembly.
func isAssembly(dir string) bool {
	return slices.ContainsFunc(assemblyDirs, func(a string) bool { return dir == a || strings.HasPrefix(dir, a+"/") })
}

// isLibraryFloor reports whether the package in dir is an internal
// package of the library's floor.
func isLibraryFloor(dir string) bool {
	return strings.HasPrefix(dir, "internal/") && !isHarness(dir) && !isAssembly(dir)
}

// moduleImports returns, for every package directory of the module, the
// packages of the module its files import, read from the sources
// whatever their build constraints, so that no platform's file escapes.
func moduleImports(t *testing.T) map[string]pkgImports {
	t.Helper()
	pkgs := map[string]pkgImports{}
	fset := token.NewFileSet()
	for _, p := range goFiles(t) {
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		require.NoError(t, err)
		dir := filepath.ToSlash(filepath.Dir(p))
		pkg := pkgs[dir]
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			require.NoError(t, err)
			rel, ok := strings.CutPrefix(imp, modulePath+"/")
			if imp == modulePath {
				rel, ok = ".", true
			}
			if !ok {
				continue
			}
			if strings.HasSuffix(p, "_test.go") {
				pkg.tests = appendNew(pkg.tests, rel)
			} else {
				pkg.code = appendNew(pkg.code, rel)
			}
		}
		pkgs[dir] = pkg
	}
	return pkgs
}

// appendNew appends s to list unless list has it already.
func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
