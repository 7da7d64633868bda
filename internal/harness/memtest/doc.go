// Package memtest gives tests the pair of object stores most of them start
// from: two brokers' stores, in two AZs of one memstore cluster, and a
// storagetest.Harness making them, for the conformance suites and the
// checks of store wrappers.
//
// It lives under internal/harness, the folder of the packages only tests
// import: it imports the library itself (memstore, storage/storagetest), so a library package
// importing it would run the imports back up; layout_test.go at the
// module's root fails if any non-test code outside the folder imports it.
package memtest
