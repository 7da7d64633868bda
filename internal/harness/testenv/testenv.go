package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// RequireEnv is set by scripts/test.sh: the servers are up and the tools
// installed.
const RequireEnv = "ACTIVETIER_REQUIRE_SERVERS"

// The variables scripts/test.sh sets to the servers it started.
const (
	S3Endpoint  = "ACTIVETIER_S3_ENDPOINT"
	GCSEndpoint = "ACTIVETIER_GCS_ENDPOINT"
)

// Server returns the value of env, the address of a server the script
// starts (what names it, for the messages), or ends the test.
func Server(t testing.TB, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		missing(t, what+": "+env+" is not set")
	}
	return v
}

// Tool returns the path of a program the script installs, or ends the
// test.
func Tool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		missing(t, name+" is not installed")
	}
	return path
}

// DebianPython is Debian's python3, named by its path: a python3 earlier
// on PATH (pyenv's) does not see the Debian packages of Python modules.
const DebianPython = "/usr/bin/python3"

// Python returns DebianPython once it imports module, which the Debian
// package pkg installs (scripts/test.sh installs it), or ends the test.
func Python(t testing.TB, module, pkg string) string {
	t.Helper()
	if out, err := exec.Command(DebianPython, "-c", "import "+module).CombinedOutput(); err != nil {
		missing(t, fmt.Sprintf("%s with the module %s (Debian package %s): %v: %s", DebianPython, module, pkg, err, out))
	}
	return DebianPython
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("needs %s, although %s says scripts/test.sh provided it", why, RequireEnv)
	}
	t.Skipf("needs %s; run the test through `bash scripts/test.sh`, which provides it", why)
}
