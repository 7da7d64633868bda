// Package storage holds the contracts a backend or a broker implements for
// activetier, and their errors; nothing else.
//
// A backend implements ObjectStore (and, to let the follower read into
// buffers it reuses, RangeReader): memstore, s3express, gcsstore and
// fsstore do. A broker implements LocalLog over its own log, which holds
// Batches and the EpochEntries of its leader-epoch cache. The errors say
// what a call's failure means to the engines, to be tested with errors.Is:
// ErrNotFound, ErrAlreadyExists, ErrUnavailable, ErrInvalidRange,
// ErrUnknownBucket and ErrPermanent for ObjectStore; ErrNotContiguous,
// ErrNotBatchBoundary, ErrInvalidOffset and ErrInvalidBatch for LocalLog.
// Package storagetest holds the conformance suites that check an
// implementation against them.
//
// The package imports nothing of activetier but metadata, for the
// partition and object names the contracts speak of, so an implementation
// depends on the contract alone: not on the engines (walstore, directread)
// that call it, the protocol cores behind them, the object format
// (combiner) or the fencing rules (fencing), which all import this
// package instead.
//
// What a call of an implementation that breaks its contract becomes is the
// engines' business, not the contract's: walstore and directread report it as a
// *walstore.DependencyError matching walstore.ErrContractViolation, for
// the metadata log (whose contract is package metadata's) as for these.
package storage
