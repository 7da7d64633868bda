// Package clustertest runs a small replicated cluster in one process for
// tests: brokers in AZs az1..az3, each with a bucket, a local log that
// records every append, and a walstore.Node started on demand, all sharing
// one metadata log. The cluster itself (brokers, their Nodes, the
// controller's placement and leaders, log comparison) is internal/cluster,
// the one the demo runs; this package adds what tests need on top: a
// pluggable backend (object storage and metadata log), so the same
// scenarios run over memstore, over a real S3 server through s3express,
// and over Kafka through metadata/kafkalog; faults and GET counts on every
// broker's store; zombie leaders (a broker nobody told); and helpers that
// fail the test instead of returning errors.
//
// It also holds the seven failure scenarios of docs/design.md ("Failure
// scenarios"), the ones the public KIP-1176 discussion raised, as functions
// any backend's tests call.
//
// It lives under internal/harness, the folder of the packages only tests
// import: it imports the library itself (walstore, directread, memstore), so a library package
// importing it would run the imports back up; layout_test.go at the
// module's root fails if any non-test code outside the folder imports it.
package clustertest
