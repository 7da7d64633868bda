// Package scripttest runs a package's data-driven scripts: the files
// testdata/*.txt in the format of github.com/cockroachdb/datadriven, each
// a list of commands with the expected output below each one. The protocol
// cores' interaction tests are such scripts, in the manner of
// etcd-io/raft's. Running the tests with -rewrite (a flag of datadriven)
// writes the output the code gives now below each command instead of
// comparing.
//
// It lives under internal/harness, the folder of the packages only tests
// import. It imports nothing of the library, but it exists for tests
// alone, and the library's own internal packages are the ones outside the
// folder; layout_test.go at the module's root fails if any non-test code
// outside the folder imports it.
package scripttest
