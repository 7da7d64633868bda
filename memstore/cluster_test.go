package memstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

const (
	az1, az2         = "use1-az4", "use1-az6"
	bucket1, bucket2 = "wal--use1-az4--x-s3", "wal--use1-az6--x-s3"
)

func twoAZs() map[string]string { return map[string]string{az1: bucket1, az2: bucket2} }

// newCluster returns a two-AZ cluster and its two stores.
func newCluster(t *testing.T, cfg memstore.ClusterConfig) (*memstore.Cluster, *memstore.Store, *memstore.Store) {
	t.Helper()
	if cfg.Buckets == nil {
		cfg.Buckets = twoAZs()
	}
	c, err := memstore.NewCluster(cfg)
	require.NoError(t, err)
	s1, err := c.Store(az1)
	require.NoError(t, err)
	s2, err := c.Store(az2)
	require.NoError(t, err)
	return c, s1, s2
}

func TestNewClusterValidatesConfig(t *testing.T) {
	cases := []struct {
		name    string
		cfg     memstore.ClusterConfig
		wantErr string
	}{
		{"no buckets", memstore.ClusterConfig{}, "ClusterConfig.Buckets"},
		{"empty AZ", memstore.ClusterConfig{Buckets: map[string]string{"": "b"}}, "empty AZ"},
		{"empty bucket", memstore.ClusterConfig{Buckets: map[string]string{"az": ""}}, `Buckets["az"]`},
		{"shared bucket", memstore.ClusterConfig{Buckets: map[string]string{"a": "b", "c": "b"}}, `bucket "b"`},
		{"negative median", memstore.ClusterConfig{Buckets: twoAZs(),
			Profile: memstore.Profile{Get: memstore.Latency{Median: -1}}}, "Profile.Get.Median"},
		{"NaN sigma", memstore.ClusterConfig{Buckets: twoAZs(),
			Profile: memstore.Profile{Put: memstore.Latency{Sigma: math.NaN()}}}, "Profile.Put.Sigma"},
		{"cross-AZ bounds reversed", memstore.ClusterConfig{Buckets: twoAZs(),
			Profile: memstore.Profile{CrossAZMin: 2, CrossAZMax: 1}}, "CrossAZMin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := memstore.NewCluster(c.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.wantErr)
		})
	}
}

func TestStoreOfUnknownAZ(t *testing.T) {
	c, _, _ := newCluster(t, memstore.ClusterConfig{})
	_, err := c.Store("use1-az1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"use1-az1"`)
	require.Error(t, c.SetOutage("use1-az1", true))
}

func TestParseProfile(t *testing.T) {
	for _, name := range memstore.ProfileNames() {
		p, err := memstore.ParseProfile(name)
		require.NoError(t, err, name)
		assert.Equal(t, name, p.Name)
		require.NoError(t, p.Validate(), name)
	}
	none, err := memstore.ParseProfile("none")
	require.NoError(t, err)
	assert.Equal(t, memstore.Profile{Name: "none"}, none, "none must be the zero profile")

	_, err = memstore.ParseProfile("s3-express")
	require.ErrorIs(t, err, memstore.ErrUnknownProfile)
	assert.Contains(t, err.Error(), "s3express", "the error lists the valid names")
}

// TestLatencyWaits checks each request's wait, with a profile that has no
// noise so every wait is known exactly.
func TestLatencyWaits(t *testing.T) {
	const ms = time.Millisecond
	profile := memstore.Profile{
		Name:       "exact",
		Get:        memstore.Latency{Median: 2 * ms, PerMiB: 8 * ms},
		Put:        memstore.Latency{Median: 5 * ms, PerMiB: 10 * ms},
		Delete:     memstore.Latency{Median: 3 * ms},
		List:       memstore.Latency{Median: 4 * ms},
		CrossAZMin: 1 * ms,
		CrossAZMax: 1 * ms,
	}
	clock := newFakeClock(true)
	c, s1, s2 := newCluster(t, memstore.ClusterConfig{Profile: profile, Clock: clock})
	ctx := t.Context()

	ref, err := s1.Put(ctx, "obj", make([]byte, 1<<20))
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{15 * ms}, clock.Waits(), "PUT of 1 MiB")

	_, err = s1.GetRange(ctx, ref, 0, 1<<19)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{6 * ms}, clock.Waits(), "GET of 512 KiB in the same AZ")
	_, err = s2.GetRange(ctx, ref, 0, 1<<19)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{7 * ms}, clock.Waits(), "GET of 512 KiB across AZs")

	_, err = s2.List(ctx, bucket1, "")
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{5 * ms}, clock.Waits(), "LIST across AZs")
	require.NoError(t, s1.Delete(ctx, []metadata.ObjectRef{ref}))
	assert.Equal(t, []time.Duration{3 * ms}, clock.Waits(), "DELETE")

	remove := c.AddFault(faults.On(faults.IsOp(faults.OpPut), faults.Delay(100*ms)))
	_, err = s1.Put(ctx, "slow", nil)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{105 * ms}, clock.Waits(), "a PUT slowed down by a fault")
	remove()
	_, err = s1.Put(ctx, "fast", nil)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{5 * ms}, clock.Waits(), "the slowdown removed")
}

func TestSameSeedReplays(t *testing.T) {
	p, err := memstore.ParseProfile("s3express")
	require.NoError(t, err)
	run := func(seed uint64) ([]time.Duration, []string) {
		clock := newFakeClock(true)
		_, s1, s2 := newCluster(t, memstore.ClusterConfig{Profile: p, Seed: seed, Clock: clock})
		for i := range 50 {
			ref, err := s1.Put(t.Context(), fmt.Sprintf("k%02d", i), make([]byte, 100*i))
			require.NoError(t, err)
			_, err = s2.GetRange(t.Context(), ref, 0, 1)
			if i == 0 {
				require.ErrorIs(t, err, storage.ErrInvalidRange)
			} else {
				require.NoError(t, err)
			}
		}
		infos, err := s2.List(t.Context(), bucket1, "k")
		require.NoError(t, err)
		var keys []string
		for _, info := range infos {
			keys = append(keys, info.Ref.Key)
		}
		return clock.Waits(), keys
	}
	waitsA, keysA := run(7)
	waitsB, keysB := run(7)
	assert.Equal(t, waitsA, waitsB, "latencies with one seed")
	assert.Equal(t, keysA, keysB, "List order with one seed")
	assert.False(t, slices.IsSorted(keysA), "List order is shuffled, not sorted")
	waitsC, keysC := run(8)
	assert.NotEqual(t, waitsA, waitsC, "another seed gives other latencies")
	assert.NotEqual(t, keysA, keysC, "another seed gives another List order")
}

func TestOutage(t *testing.T) {
	c, s1, s2 := newCluster(t, memstore.ClusterConfig{})
	ctx := t.Context()
	in1, err := s1.Put(ctx, "in-az1", []byte("one"))
	require.NoError(t, err)
	in2, err := s2.Put(ctx, "in-az2", []byte("two"))
	require.NoError(t, err)

	require.NoError(t, c.SetOutage(az1, true))
	require.NoError(t, c.SetOutage(az1, true), "SetOutage is idempotent")
	for _, s := range []*memstore.Store{s1, s2} {
		_, err = s.GetRange(ctx, in1, 0, 1)
		assert.ErrorIs(t, err, storage.ErrUnavailable, "GET from the down bucket by the store in %s", s.Local().AZ)
		assert.ErrorContains(t, err, bucket1)
		_, err = s.List(ctx, bucket1, "")
		assert.ErrorIs(t, err, storage.ErrUnavailable, "LIST")
		assert.ErrorIs(t, s.Delete(ctx, []metadata.ObjectRef{in1}), storage.ErrUnavailable, "DELETE")
		got, err := s.GetRange(ctx, in2, 0, 3)
		require.NoError(t, err, "the other AZ's bucket is up")
		assert.Equal(t, "two", string(got))
	}
	_, err = s1.Put(ctx, "new", []byte("x"))
	assert.ErrorIs(t, err, storage.ErrUnavailable, "PUT to the down bucket")
	// A Delete spanning both buckets deletes what it can.
	err = s2.Delete(ctx, []metadata.ObjectRef{in1, in2})
	assert.ErrorIs(t, err, storage.ErrUnavailable)
	_, err = s2.GetRange(ctx, in2, 0, 1)
	assert.ErrorIs(t, err, storage.ErrNotFound, "the up bucket's object was deleted")

	require.NoError(t, c.SetOutage(az1, false))
	got, err := s2.GetRange(ctx, in1, 0, 3)
	require.NoError(t, err, "objects survive an outage")
	assert.Equal(t, "one", string(got))
	_, err = s1.GetRange(ctx, metadata.ObjectRef{Bucket: bucket1, Key: "new"}, 0, 1)
	assert.ErrorIs(t, err, storage.ErrNotFound, "a PUT refused during the outage stored nothing")
}

func TestOutageCutsShortRequestsInFlight(t *testing.T) {
	clock := newFakeClock(false)
	p, err := memstore.ParseProfile("s3express")
	require.NoError(t, err)
	c, s1, s2 := newCluster(t, memstore.ClusterConfig{Profile: p, Clock: clock})
	done := make(chan error, 1)
	go func() {
		_, err := s2.Put(t.Context(), "k", []byte("v"))
		done <- err
	}()
	<-clock.asked // the PUT is waiting out its latency
	require.NoError(t, c.SetOutage(az2, true))
	require.ErrorIs(t, <-done, storage.ErrUnavailable)
	require.NoError(t, c.SetOutage(az2, false))

	clock.Advance(time.Second) // let the lookup below complete
	go func() {
		_, err := s1.GetRange(t.Context(), metadata.ObjectRef{AZ: az2, Bucket: bucket2, Key: "k"}, 0, 1)
		done <- err
	}()
	<-clock.asked
	clock.Advance(time.Second)
	require.ErrorIs(t, <-done, storage.ErrNotFound, "the PUT cut short stored nothing")
}

func TestContextCancelledDuringWait(t *testing.T) {
	clock := newFakeClock(false)
	p, err := memstore.ParseProfile("s3express")
	require.NoError(t, err)
	c, s1, _ := newCluster(t, memstore.ClusterConfig{Profile: p, Clock: clock})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s1.Put(ctx, "k", []byte("v"))
		done <- err
	}()
	<-clock.asked
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	st := c.Stats().Total
	assert.Equal(t, int64(1), st.PutRequests)
	assert.Equal(t, int64(1), st.FailedRequests, "a request abandoned mid-flight counts as failed")
}

func TestInjectedErrors(t *testing.T) {
	c, s1, s2 := newCluster(t, memstore.ClusterConfig{Seed: 3})
	ctx := t.Context()
	ref, err := s1.Put(ctx, "wal/1", []byte("payload"))
	require.NoError(t, err)

	// Only GETs of keys under wal/ made by the store in az2 fail.
	remove := c.AddFault(faults.On(func(r faults.Request) bool {
		return r.Op.IsGet() && r.StoreAZ == az2 && strings.HasPrefix(r.Key, "wal/")
	}, faults.Fail(storage.ErrUnavailable)))
	_, err = s2.GetRange(ctx, ref, 0, 1)
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.ErrorContains(t, err, "wal/1", "the error names the key")
	_, err = s1.GetRange(ctx, ref, 0, 1)
	require.NoError(t, err, "another store's GET")
	_, err = s2.List(ctx, bucket1, "wal/")
	require.NoError(t, err, "another op")
	remove()
	_, err = s2.GetRange(ctx, ref, 0, 1)
	require.NoError(t, err, "the fault removed")

	// A custom error survives wrapping.
	throttled := errors.New("SlowDown")
	c.AddFault(faults.On(faults.IsOp(faults.OpDelete), faults.Fail(throttled)))
	require.ErrorIs(t, s1.Delete(ctx, []metadata.ObjectRef{ref}), throttled)
	c.ClearFaults()
	require.NoError(t, s1.Delete(ctx, []metadata.ObjectRef{ref}))
}

func TestInjectedErrorRate(t *testing.T) {
	const seed, n, rate = 11, 2000, 0.25
	c, s1, _ := newCluster(t, memstore.ClusterConfig{Seed: seed})
	ref, err := s1.Put(t.Context(), "k", []byte("v"))
	require.NoError(t, err)
	c.AddFault(faults.On(faults.IsOp(faults.OpGetRange), faults.Rate(rate, seed, faults.Fail(storage.ErrUnavailable))))
	c.ResetStats()
	failed := 0
	for range n {
		if _, err := s1.GetRange(t.Context(), ref, 0, 1); err != nil {
			require.ErrorIs(t, err, storage.ErrUnavailable)
			failed++
		}
	}
	// Binomial(2000, 0.25): mean 500, standard deviation 19.
	assert.InDelta(t, n*rate, failed, 80, "failures out of %d at rate %v (seed %d)", n, rate, seed)
	assert.Equal(t, int64(failed), c.Stats().Total.FailedRequests)
}

func TestErrorAfterApply(t *testing.T) {
	c, s1, _ := newCluster(t, memstore.ClusterConfig{})
	remove := c.AddFault(faults.On(faults.IsOp(faults.OpPut), faults.FailAfter(storage.ErrUnavailable)))
	_, err := s1.Put(t.Context(), "k", []byte("v"))
	require.ErrorIs(t, err, storage.ErrUnavailable, "the response was lost")
	remove()
	_, err = s1.Put(t.Context(), "k", []byte("v"))
	require.ErrorIs(t, err, storage.ErrAlreadyExists, "yet the object was stored, so the retry finds the key taken")
}

func TestCorruptGet(t *testing.T) {
	c, s1, s2 := newCluster(t, memstore.ClusterConfig{Seed: 5})
	want := bytes.Repeat([]byte("0123456789"), 100)
	ref, err := s1.Put(t.Context(), "k", want)
	require.NoError(t, err)
	remove := c.AddFault(faults.On(faults.IsOp(faults.OpGetRange), faults.Corrupt(5)))
	for range 20 {
		got, err := s2.GetRange(t.Context(), ref, 100, 500)
		require.NoError(t, err, "a corrupted GET succeeds")
		diff := 0
		for i := range got {
			if got[i] != want[100+i] {
				diff++
			}
		}
		assert.Equal(t, 1, diff, "bytes changed by a corrupted GET")
	}
	remove()
	got, err := s2.GetRange(t.Context(), ref, 0, int64(len(want)))
	require.NoError(t, err)
	assert.Equal(t, want, got, "corruption is of the bytes returned, never of the object")
}

// TestAccounting runs a known sequence of requests and checks every
// counter of both buckets exactly.
func TestAccounting(t *testing.T) {
	c, s1, s2 := newCluster(t, memstore.ClusterConfig{})
	ctx := t.Context()
	a, err := s1.Put(ctx, "a", make([]byte, 100))
	require.NoError(t, err)
	b, err := s1.Put(ctx, "b", make([]byte, 200))
	require.NoError(t, err)
	_, err = s1.Put(ctx, "empty", nil)
	require.NoError(t, err)
	_, err = s1.Put(ctx, "a", make([]byte, 50)) // 412, its body still sent
	require.ErrorIs(t, err, storage.ErrAlreadyExists)
	_, err = s2.Put(ctx, "c", make([]byte, 30))
	require.NoError(t, err)

	_, err = s2.GetRange(ctx, a, 10, 10) // cross-AZ
	require.NoError(t, err)
	_, err = s2.GetRange(ctx, b, 0, 200) // cross-AZ
	require.NoError(t, err)
	_, err = s1.GetRange(ctx, a, 0, 100)
	require.NoError(t, err)
	_, err = s1.GetRange(ctx, a, 90, 20) // 416
	require.ErrorIs(t, err, storage.ErrInvalidRange)
	_, err = s1.GetRange(ctx, metadata.ObjectRef{Bucket: bucket1, Key: "missing"}, 0, 1) // 404
	require.ErrorIs(t, err, storage.ErrNotFound)

	// Refused before any request: nothing is counted.
	_, err = s1.GetRange(ctx, a, -1, 1)
	require.ErrorIs(t, err, storage.ErrInvalidRange)
	_, err = s1.GetRange(ctx, metadata.ObjectRef{Bucket: "elsewhere", Key: "a"}, 0, 1)
	require.ErrorIs(t, err, storage.ErrUnknownBucket)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s1.Put(cancelled, "x", make([]byte, 1000))
	require.ErrorIs(t, err, context.Canceled)

	// One DELETE per bucket: 3 keys in bucket1, 1 in bucket2.
	require.NoError(t, s2.Delete(ctx, []metadata.ObjectRef{a, b, {Bucket: bucket1, Key: "missing"}, {Bucket: bucket2, Key: "c"}}))
	_, err = s1.List(ctx, bucket1, "")
	require.NoError(t, err)

	want := map[string]memstore.Counters{
		bucket1: {
			PutRequests: 4, BytesUp: 350,
			GetRequests: 5, BytesDown: 310,
			DeleteRequests: 1, DeleteKeys: 3,
			ListRequests:    1,
			FailedRequests:  3,
			CrossAZRequests: 3, CrossAZBytes: 210,
		},
		bucket2: {PutRequests: 1, BytesUp: 30, DeleteRequests: 1, DeleteKeys: 1},
	}
	st := c.Stats()
	assert.Equal(t, want, st.Buckets)
	assert.Equal(t, memstore.Counters{
		PutRequests: 5, BytesUp: 380, GetRequests: 5, BytesDown: 310, DeleteRequests: 2, DeleteKeys: 4,
		ListRequests: 1, FailedRequests: 3, CrossAZRequests: 3, CrossAZBytes: 210,
	}, st.Total)
	assert.Equal(t, int64(13), st.Total.Requests())

	c.ResetStats()
	assert.Equal(t, memstore.Counters{}, c.Stats().Total)
}

// TestBatchAccounting checks that DELETE and LIST count S3's 1000-key
// batches and pages.
func TestBatchAccounting(t *testing.T) {
	c, s1, _ := newCluster(t, memstore.ClusterConfig{})
	ctx := t.Context()
	var refs []metadata.ObjectRef
	for i := range 2500 {
		r, err := s1.Put(ctx, fmt.Sprintf("k%04d", i), []byte{1})
		require.NoError(t, err)
		refs = append(refs, r)
	}
	c.ResetStats()
	infos, err := s1.List(ctx, bucket1, "k")
	require.NoError(t, err)
	require.Len(t, infos, 2500)
	_, err = s1.List(ctx, bucket1, "none-")
	require.NoError(t, err)
	require.NoError(t, s1.Delete(ctx, refs))
	st := c.Stats().Buckets[bucket1]
	assert.Equal(t, int64(3+1), st.ListRequests, "three pages, and one for an empty listing")
	assert.Equal(t, int64(3), st.DeleteRequests)
	assert.Equal(t, int64(2500), st.DeleteKeys)
}

func TestConcurrentFaultsAndOutages(t *testing.T) {
	// Requests, fault changes and outages at once, for the race detector;
	// every error must be one of the contract's.
	c, s1, s2 := newCluster(t, memstore.ClusterConfig{Seed: 9})
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range 4 {
		s := s1
		if w%2 == 1 {
			s = s2
		}
		wg.Go(func() {
			for i := range 200 {
				ref, err := s.Put(ctx, fmt.Sprintf("w%d-%d", w, i), []byte("data"))
				if err != nil {
					assert.ErrorIs(t, err, storage.ErrUnavailable)
					continue
				}
				if _, err := s1.GetRange(ctx, ref, 0, 4); err != nil {
					assert.ErrorIs(t, err, storage.ErrUnavailable)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 100 {
			assert.NoError(t, c.SetOutage(az1, i%2 == 0))
			remove := c.AddFault(faults.Rate(0.1, uint64(i), faults.Fail(storage.ErrUnavailable)))
			_ = c.Stats()
			remove()
		}
		assert.NoError(t, c.SetOutage(az1, false))
	})
	wg.Wait()
}

// An injector sees the requests S3 would: a Delete of 2500 keys is three,
// and so is a List of 2500 objects; each Delete request carries its keys.
func TestFaultsPerRequest(t *testing.T) {
	c, s1, _ := newCluster(t, memstore.ClusterConfig{})
	ctx := t.Context()
	refs := make([]metadata.ObjectRef, 2500)
	for i := range refs {
		ref, err := s1.Put(ctx, fmt.Sprintf("k%04d", i), []byte("v"))
		require.NoError(t, err)
		refs[i] = ref
	}
	var seen []faults.Request
	c.AddFault(faults.Func(func(_ context.Context, r faults.Request) faults.Effect {
		seen = append(seen, r)
		return faults.Effect{}
	}))
	_, err := s1.List(ctx, bucket1, "k")
	require.NoError(t, err)
	require.NoError(t, s1.Delete(ctx, refs))
	var ops []faults.Op
	var keys []int
	for _, r := range seen {
		ops = append(ops, r.Op)
		keys = append(keys, len(r.Refs))
	}
	assert.Equal(t, []faults.Op{faults.OpList, faults.OpList, faults.OpList, faults.OpDelete, faults.OpDelete, faults.OpDelete}, ops)
	assert.Equal(t, []int{0, 0, 0, 1000, 1000, 500}, keys)
}
