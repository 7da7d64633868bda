// Package faults injects failures into the project's dependencies — the
// object store (storage.ObjectStore and storage.RangeReader), the metadata
// log (metadata.Log) and the local log (storage.LocalLog) — for tests,
// the simulation and the demo. It is the tree's one fault model.
//
// An Injector decides, for each operation a wrapper is about to make (a
// Request: which operation, and what it addresses), its Effect: a delay,
// an error instead of the operation, an error after the operation took
// effect (a response lost on its way back), or a changed byte in what a
// read returns. Injectors compose: On limits one to the requests a
// predicate selects, Rate to a seeded fraction of them, Once to the first,
// Any applies several, Set holds those added and removed while a test
// runs, and Outage fails every request to the buckets it has taken down.
// WrapStore, WrapLog and WrapLocal put an Injector in front of a
// dependency and keep its contract; a component that makes several
// requests per call (memstore's Delete of more than 1000 keys, say) can
// consult an Injector per request itself, through Effect's methods.
//
// The shape follows the error-injecting file system of Pebble (its vfs
// errorfs package): an interface that decides per operation, and wrappers
// that consult it.
package faults
