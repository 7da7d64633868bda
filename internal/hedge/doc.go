// Package hedge decides when a request to the object store that has not
// answered is worth sending again: the tail-latency remedy of Amazon's
// "Performance design patterns for Amazon S3", which recommends re-issuing
// a request that has not answered by about its p95–p99 latency, since the
// new one most likely takes another, faster path. It is shared by the
// leader and follower cores (a PUT that overstays, a ranged GET that
// does) and, like them, has no clock, goroutines or I/O: latencies come in
// as observations, and the threshold is a pure function of them.
//
// An Estimator learns a latency quantile from the last observations; a
// Budget bounds the extra requests to a fraction of the requests made, as
// gRPC's retry throttling does with tokens.
package hedge
