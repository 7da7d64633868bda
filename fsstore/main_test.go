package fsstore_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		// A writer process of TestPutRaceAcrossProcesses: it runs no
		// tests, and goleak has nothing to check in it.
		os.Exit(childMain(dir))
	}
	goleak.VerifyTestMain(m)
}
