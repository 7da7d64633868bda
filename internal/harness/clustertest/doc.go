// Package clustertest runs a small replicated cluster in one process for
// tests: brokers in AZs az1..az3, each with a bucket, a local log, and a
// walstore.Node started on demand, all sharing one metadata
// log. The backend (object storage and metadata log) is pluggable, so the
// same scenarios run over memstore, over a real S3 server through
// s3express, and over Kafka through metadata/kafkalog.
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
