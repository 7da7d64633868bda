// Package metering measures what replication through object storage does
// and what it costs, from outside the engines: Meter.Store wraps a
// storage.ObjectStore and Meter.Log wraps a metadata.Log (in the manner of
// storage middleware: same interface, same results, same errors), and the
// Meter counts requests, bytes, errors by kind and latencies, and keeps a
// cost ledger that attributes every request and byte to the partitions that
// caused it.
//
// Attribution needs no hook in the engines, because what they send carries
// its own description:
//
//   - A PUT body is a combined object, so its footer (combiner.ReadFooter)
//     lists its sections: the PUT's request and its uploaded bytes are split
//     across the sections' partitions by section bytes (header and footer
//     bytes go with them, in proportion).
//   - A metadata message (metadata.DecodeMessage) lists entries and
//     epoch-start markers: its bytes, times the AZ crossings they make, are
//     split equally among them, and each entry read costs its partition one
//     follower fetch's worth of control traffic.
//   - A ranged GET is split across the partitions whose sections it covers,
//     by bytes. Which bytes of an object belong to which partition the Meter
//     learns from the PUT bodies it saw and from the entries of the metadata
//     messages it saw, so a follower's Meter knows the layout of the objects
//     its own metadata names. Bytes of a range that no known section covers
//     (a gap a coalesced GET read across) follow the covered ones.
//
// The ledger keeps a row per topic name and partition: the incarnations of
// a topic deleted and created again under its name (Kafka gives each a new
// topic id) share the name's rows, so re-creating topics adds none.
//
// What cannot be attributed (a PUT body that is not a combined object, a GET
// of an object whose layout was never seen, a metadata message that does
// not decode, a partition whose topic name Kafka would refuse) is kept in
// the ledger as unattributed, so that the ledger
// always sums to the whole bill: summed over partitions it equals
// costmodel.RunCost of the same traffic, storage aside.
//
// The Meter is safe for concurrent use, holds bounded memory (Config's
// limits), and never changes what the wrapped store or log returns. It does
// not import Prometheus; package promexport exports a Meter, and a
// walstore.Node's own statistics, as Prometheus metrics.
package metering
