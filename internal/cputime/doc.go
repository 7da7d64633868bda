// Package cputime reads the CPU time the process has used, for benchmarks
// that report throughput per CPU second: on a machine other work shares,
// wall time says how busy the machine was as much as what the code
// cost.
package cputime
