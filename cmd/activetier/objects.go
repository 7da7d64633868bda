package main

import (
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage"
)

// objectBackend is where the sim's buckets are: memstore's in-memory
// cluster (memObjects) or an S3 endpoint (s3Objects). The sim needs the
// same three things of either: a store per broker, an AZ outage, and the
// requests counted as a bill counts them.
type objectBackend interface {
	// store returns a new object store for a broker in az: it writes to
	// az's bucket and reads every bucket of the deployment.
	store(az string) (storage.ObjectStore, error)
	// setOutage makes az's bucket unreachable for every store, for the
	// rest of the run.
	setOutage(az string) error
	// requests returns the requests the stores have made so far.
	requests() requestCounts
}

// requestCounts are the object store requests of a run and their bytes,
// counted once a request is made (a call refused before any request counts
// nothing), failed ones included, as S3 bills them.
type requestCounts struct {
	puts, gets, deletes, lists int64
	// failed counts requests answered with an error or none while their
	// caller still waited: the store's failures.
	failed int64
	// outcomes says whether the backend tells the requests its callers
	// gave up on from the failed ones, and the PUTs' outcomes; memstore,
	// counting its own requests, does not (its failed includes them).
	outcomes bool
	// givenUp counts requests whose caller stopped waiting before the
	// answer (a hedge's loser cancelled, an attempt past the engine's own
	// timeout, a request in flight when a broker stopped): billed, but
	// not the store's failure, and not in failed.
	givenUp int64
	// Every PUT ends one way: stored (answered with success, whole, while
	// its caller waited), failed or given up; the three sum to puts.
	putsStored, putsFailed, putsGivenUp int64
	// bytesUp is the body bytes of every PUT made; bytesDown the object
	// bytes returned by successful GETs.
	bytesUp, bytesDown int64
}

// memObjects is the default backend: a memstore cluster with one bucket
// per AZ and the chosen latency profile, which counts its own requests.
type memObjects struct{ c *memstore.Cluster }

func newMemObjects(azs []string, profile memstore.Profile, seed uint64) (memObjects, error) {
	buckets := make(map[string]string, len(azs))
	for _, az := range azs {
		buckets[az] = bucketName(az)
	}
	c, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: buckets, Profile: profile, Seed: seed})
	return memObjects{c}, err
}

func (m memObjects) store(az string) (storage.ObjectStore, error) { return m.c.Store(az) }

func (m memObjects) setOutage(az string) error { return m.c.SetOutage(az, true) }

func (m memObjects) requests() requestCounts {
	t := m.c.Stats().Total
	return requestCounts{
		puts: t.PutRequests, gets: t.GetRequests, deletes: t.DeleteRequests, lists: t.ListRequests,
		failed: t.FailedRequests, bytesUp: t.BytesUp, bytesDown: t.BytesDown,
	}
}

// bucketName is the demo's bucket for az unless --buckets names another.
func bucketName(az string) string { return "activetier-demo-" + az }
