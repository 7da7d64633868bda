// Package testenv finds the real servers and tools scripts/test.sh starts
// or installs for the tests (an S3 server, a Cloud Storage emulator,
// kcat, Python's confluent-kafka, chromium). Under a plain `go test` a
// test that needs one skips; under the script, which sets
// ACTIVETIER_REQUIRE_SERVERS, a missing one fails the test, so that
// nothing is skipped when the suite runs.
//
// It lives under internal/harness, the folder of the packages only tests
// import. It imports nothing of the library, but it exists for tests
// alone, and the library's own internal packages are the ones outside the
// folder; layout_test.go at the module's root fails if any non-test code
// outside the folder imports it.
package testenv
