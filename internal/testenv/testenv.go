// Package testenv finds the real servers and tools scripts/test.sh starts
// or installs for the tests (an S3 server, a Cloud Storage emulator,
// kcat, chromium). Under a plain `go test` a test that needs one skips;
// under the script, which sets ACTIVETIER_REQUIRE_SERVERS, a missing one
// fails the test, so that nothing is skipped when the suite runs.
package testenv

import (
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

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("needs %s, although %s says scripts/test.sh provided it", why, RequireEnv)
	}
	t.Skipf("needs %s; run the test through `bash scripts/test.sh`, which provides it", why)
}
