// Package cluster runs a replicated cluster in one process: brokers spread
// over AZs, each with its object store, a local log and a walstore.Node,
// all sharing one metadata log, and the controller that owns the replica
// assignment, chooses each partition's leader and epoch, and, when an AZ
// fails, elects new leaders by package election's rule. The demo
// (cmd/activetier) and the test clusters of internal/harness/clustertest
// both build on it, so the demo runs the cluster and controller code the
// failure scenarios test.
//
// It returns errors rather than failing a test: the test helpers that
// require are clustertest's. It knows no backend: the caller gives each
// broker its store and local log, and the metadata log.
//
// It is an assembly: it wires the library's engines (walstore, election,
// storage's contracts) together, so no library package may import it;
// cmd/ and internal/harness may. layout_test.go at the module's root
// checks that floor.
package cluster
