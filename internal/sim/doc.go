// Package sim is activetier's deterministic simulation: a whole cluster in
// one process, driven by one seed through faults, with invariants checked
// all along. Its tests are the evidence that nothing is lost and nothing
// diverges.
package sim
