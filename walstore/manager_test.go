package walstore_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

func newStores(t *testing.T) (*memstore.Cluster, storage.ObjectStore, storage.ObjectStore) {
	t.Helper()
	c, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "bucket-az1", "az2": "bucket-az2"},
	})
	require.NoError(t, err)
	local, err := c.Store("az1")
	require.NoError(t, err)
	peer, err := c.Store("az2")
	require.NoError(t, err)
	return c, local, peer
}

func copyInputs(n int, batchesPer int) []walstore.CopyInput {
	inputs := make([]walstore.CopyInput, n)
	for i := range inputs {
		tp := metadata.TopicPartition{Topic: "logs", Partition: int32(i)}
		in := walstore.CopyInput{Partition: tp, PublisherEpoch: 3}
		for b := range batchesPer {
			first := int64(1000*i + 10*b)
			in.Batches = append(in.Batches, clustertest.MakeBatch(tp, 3, first, first+9))
		}
		inputs[i] = in
	}
	return inputs
}

func TestManagerCopyFetchRoundTrip(t *testing.T) {
	ctx := context.Background()
	_, local, peer := newStores(t)
	for _, codec := range []metadata.Codec{metadata.CodecNone, metadata.CodecZstd, metadata.CodecS2} {
		t.Run(codec.String(), func(t *testing.T) {
			w, err := walstore.NewManager(walstore.ManagerConfig{Store: local, BrokerID: 7, Codec: codec})
			require.NoError(t, err)
			defer w.Close()
			r, err := walstore.NewManager(walstore.ManagerConfig{Store: peer, BrokerID: 8})
			require.NoError(t, err)
			defer r.Close()

			inputs := copyInputs(5, 3)
			entries, err := w.Copy(ctx, inputs)
			require.NoError(t, err)
			require.Len(t, entries, 5)
			for i, e := range entries {
				assert.Equal(t, inputs[i].Partition, e.Partition)
				assert.Equal(t, int32(3), e.PublisherEpoch)
				assert.Equal(t, int32(7), e.WriterBrokerID)
				assert.Equal(t, "bucket-az1", e.Object.Bucket)
			}
			res, err := r.Fetch(ctx, entries)
			require.NoError(t, err)
			for i, fr := range res {
				require.NoError(t, fr.Err)
				clustertest.RequireSameLog(t, inputs[i].Batches, fr.Batches)
			}
		})
	}
}

func TestManagerCoalescesOneObjectIntoOneGet(t *testing.T) {
	ctx := context.Background()
	c, local, peer := newStores(t)
	w, err := walstore.NewManager(walstore.ManagerConfig{Store: local})
	require.NoError(t, err)
	defer w.Close()
	entries, err := w.Copy(ctx, copyInputs(10, 2))
	require.NoError(t, err)

	tests := []struct {
		name     string
		pick     []int
		gap      int64
		wantGets int64
	}{
		{"ten adjacent sections", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, 1},
		{"holes within the gap", []int{0, 3, 9}, 0, 1},
		{"holes wider than the gap", []int{0, 3, 9}, -1, 3},
		{"adjacent pairs without gap", []int{0, 1, 5, 6}, -1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := walstore.NewManager(walstore.ManagerConfig{Store: peer, CoalesceGap: tt.gap})
			require.NoError(t, err)
			defer r.Close()
			var want []metadata.Entry
			for _, i := range tt.pick {
				want = append(want, entries[i])
			}
			c.ResetStats()
			res, err := r.Fetch(ctx, want)
			require.NoError(t, err)
			for _, fr := range res {
				require.NoError(t, fr.Err)
			}
			assert.Equal(t, tt.wantGets, c.Stats().Total.GetRequests)
		})
	}
}

// The sections of one coalesced read decode apart: sections of different
// batch counts each get their own batches, a corrupt one in the middle
// fails alone, and appending to one result's batches cannot change
// another's (they may share an array).
func TestManagerCoalescedSectionsDecodeApart(t *testing.T) {
	ctx := context.Background()
	c, local, peer := newStores(t)
	w, err := walstore.NewManager(walstore.ManagerConfig{Store: local})
	require.NoError(t, err)
	defer w.Close()
	var inputs []walstore.CopyInput
	for i, n := range []int{1, 5, 12, 3} {
		inputs = append(inputs, copyInputs(i+1, n)[i])
	}
	entries, err := w.Copy(ctx, inputs)
	require.NoError(t, err)
	entries[1].Checksum ^= 1
	r, err := walstore.NewManager(walstore.ManagerConfig{Store: peer})
	require.NoError(t, err)
	defer r.Close()
	c.ResetStats()
	res, err := r.Fetch(ctx, entries)
	require.NoError(t, err)
	assert.Equal(t, int64(1), c.Stats().Total.GetRequests)
	require.ErrorIs(t, res[1].Err, walstore.ErrCorrupt)
	assert.Empty(t, res[1].Batches)
	for _, i := range []int{0, 2, 3} {
		require.NoError(t, res[i].Err)
		clustertest.RequireSameLog(t, inputs[i].Batches, res[i].Batches)
	}
	extra := clustertest.MakeBatch(inputs[0].Partition, 3, 1_000_000, 1_000_009)
	_ = append(res[0].Batches, extra, extra)
	_ = append(res[2].Batches, extra)
	for _, i := range []int{0, 2, 3} {
		clustertest.RequireSameLog(t, inputs[i].Batches, res[i].Batches)
	}
}

func TestManagerFetchErrorsNameObjectAndPartition(t *testing.T) {
	ctx := context.Background()
	c, local, peer := newStores(t)
	w, err := walstore.NewManager(walstore.ManagerConfig{Store: local})
	require.NoError(t, err)
	defer w.Close()
	entries, err := w.Copy(ctx, copyInputs(2, 1))
	require.NoError(t, err)
	r, err := walstore.NewManager(walstore.ManagerConfig{Store: peer})
	require.NoError(t, err)
	defer r.Close()

	badChecksum := entries[0]
	badChecksum.Checksum ^= 1
	unknown := entries[0]
	unknown.Object.Bucket = "someone-elses-bucket"
	missing := entries[0]
	missing.Object.Key += ".gone"
	tests := []struct {
		name  string
		entry metadata.Entry
		down  bool
		want  error
	}{
		{"checksum mismatch", badChecksum, false, walstore.ErrCorrupt},
		{"unconfigured bucket", unknown, false, storage.ErrUnknownBucket},
		{"missing object", missing, false, storage.ErrNotFound},
		{"bucket down", entries[1], true, storage.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, c.SetOutage("az1", tt.down))
			defer c.SetOutage("az1", false)
			res, err := r.Fetch(ctx, []metadata.Entry{tt.entry})
			require.NoError(t, err)
			var fe *walstore.FetchError
			require.ErrorAs(t, res[0].Err, &fe)
			assert.ErrorIs(t, res[0].Err, tt.want)
			assert.Contains(t, res[0].Err.Error(), tt.entry.Object.Key)
			assert.Contains(t, res[0].Err.Error(), tt.entry.Partition.String())
			assert.Empty(t, res[0].Batches)
			if tt.want != walstore.ErrCorrupt {
				var de *walstore.DependencyError
				require.ErrorAs(t, res[0].Err, &de, "the store's errors name the call")
				assert.Equal(t, "ObjectStore.GetRange", de.Dependency)
			}
		})
	}
}

func TestManagerDeleteIsIdempotent(t *testing.T) {
	ctx := context.Background()
	_, local, _ := newStores(t)
	m, err := walstore.NewManager(walstore.ManagerConfig{Store: local})
	require.NoError(t, err)
	defer m.Close()
	entries, err := m.Copy(ctx, copyInputs(1, 1))
	require.NoError(t, err)
	refs := []metadata.ObjectRef{entries[0].Object}
	require.NoError(t, m.Delete(ctx, refs))
	require.NoError(t, m.Delete(ctx, refs))
	res, err := m.Fetch(ctx, entries)
	require.NoError(t, err)
	assert.ErrorIs(t, res[0].Err, storage.ErrNotFound)
}

func TestManagerConfigValidation(t *testing.T) {
	_, local, _ := newStores(t)
	tests := []struct {
		cfg  walstore.ManagerConfig
		want string
	}{
		{walstore.ManagerConfig{}, "Store"},
		{walstore.ManagerConfig{Store: local, BrokerID: -1}, "BrokerID"},
		{walstore.ManagerConfig{Store: local, Codec: 9}, "Codec"},
		{walstore.ManagerConfig{Store: local, FetchConcurrency: -2}, "FetchConcurrency"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := walstore.NewManager(tt.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// recordingStore wraps an ObjectStore, records the ranges GetRange is
// asked for, and lets a test change GetRange's and Put's answers.
type recordingStore struct {
	storage.ObjectStore
	mu     sync.Mutex
	ranges [][2]int64 // offset, length
	// get, if set, replaces the answer to GetRange: it gets the real
	// answer.
	get func(offset, length int64, data []byte, err error) ([]byte, error)
	// put, if set, replaces the reference Put returns.
	put func(ref metadata.ObjectRef) metadata.ObjectRef
	// local, if set, replaces the answer of Local.
	local *metadata.ObjectRef
}

func (s *recordingStore) Local() metadata.ObjectRef {
	if s.local != nil {
		return *s.local
	}
	return s.ObjectStore.Local()
}

func (s *recordingStore) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	s.mu.Lock()
	s.ranges = append(s.ranges, [2]int64{offset, length})
	s.mu.Unlock()
	data, err := s.ObjectStore.GetRange(ctx, ref, offset, length)
	if s.get != nil {
		return s.get(offset, length, data, err)
	}
	return data, err
}

func (s *recordingStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	ref, err := s.ObjectStore.Put(ctx, key, body)
	if err == nil && s.put != nil {
		ref = s.put(ref)
	}
	return ref, err
}

func (s *recordingStore) gets() [][2]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ranges)
}

// copyObject writes n partitions of two batches each as one object and
// returns its inputs and entries, in object order.
func copyObject(t *testing.T, store storage.ObjectStore, n int) ([]walstore.CopyInput, []metadata.Entry) {
	t.Helper()
	w, err := walstore.NewManager(walstore.ManagerConfig{Store: store})
	require.NoError(t, err)
	defer w.Close()
	inputs := copyInputs(n, 2)
	entries, err := w.Copy(context.Background(), inputs)
	require.NoError(t, err)
	return inputs, entries
}

// TestManagerFetchIsolatesBadEntries: an entry whose range is wrong must
// fail alone, in the same Fetch call that serves the good entries of the
// same object, whether it is refused before any request or found out by
// the store.
func TestManagerFetchIsolatesBadEntries(t *testing.T) {
	ctx := context.Background()
	_, local, peer := newStores(t)
	inputs, entries := copyObject(t, local, 4)
	last := entries[3]
	objects, err := local.List(ctx, entries[0].Object.Bucket, "")
	require.NoError(t, err)
	require.Len(t, objects, 1)
	size := objects[0].Size

	tests := []struct {
		name string
		bad  func(e metadata.Entry) metadata.Entry
		// gets are the ranges requested: the coalesced one, then one per
		// entry when it failed.
		fallback bool
	}{
		{"range runs past the object's end", func(e metadata.Entry) metadata.Entry { e.Length = size - e.Position + 1; return e }, true},
		{"range starts past the object's end", func(e metadata.Entry) metadata.Entry { e.Position = size + 10; return e }, true},
		{"length far past the end", func(e metadata.Entry) metadata.Entry { e.Length = math.MaxInt64 - e.Position; return e }, true},
		{"negative position", func(e metadata.Entry) metadata.Entry { e.Position = -1; return e }, false},
		{"zero length", func(e metadata.Entry) metadata.Entry { e.Length = 0; return e }, false},
		{"negative length", func(e metadata.Entry) metadata.Entry { e.Length = -e.Length; return e }, false},
		{"end overflows int64", func(e metadata.Entry) metadata.Entry { e.Length = math.MaxInt64; return e }, false},
		{"minimum position and length", func(e metadata.Entry) metadata.Entry { e.Position, e.Length = math.MinInt64, math.MinInt64; return e }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &recordingStore{ObjectStore: peer}
			r, err := walstore.NewManager(walstore.ManagerConfig{Store: store, Logger: discard()})
			require.NoError(t, err)
			defer r.Close()
			// The bad entry sits between good ones of the same object.
			bad := tt.bad(entries[2])
			want := []metadata.Entry{entries[0], entries[1], bad, entries[3]}
			res, err := r.Fetch(ctx, want)
			require.NoError(t, err)
			require.Len(t, res, 4)
			for i, good := range []int{0, 1, 3} {
				require.NoError(t, res[good].Err, "good entry %d", i)
				clustertest.RequireSameLog(t, inputs[good].Batches, res[good].Batches)
			}
			var fe *walstore.FetchError
			require.ErrorAs(t, res[2].Err, &fe)
			require.ErrorIs(t, res[2].Err, storage.ErrInvalidRange)
			assert.Equal(t, bad.Position, fe.Position)
			assert.Equal(t, bad.Length, fe.Length)
			assert.Equal(t, bad.Partition, fe.Partition)
			assert.Empty(t, res[2].Batches)

			gets := store.gets()
			if tt.fallback {
				require.Len(t, gets, 5, "one coalesced GET, then one per entry: %v", gets)
				for i, e := range want {
					assert.Contains(t, gets[1:], [2]int64{e.Position, e.Length}, "entry %d read on its own", i)
				}
			} else {
				require.Len(t, gets, 1, "the bad entry is refused without a request: %v", gets)
				assert.Equal(t, [2]int64{entries[0].Position, last.Position + last.Length - entries[0].Position}, gets[0])
			}
		})
	}

	// Another object's coalesced read is not affected.
	inputs2, entries2 := copyObject(t, local, 2)
	store := &recordingStore{ObjectStore: peer}
	r, err := walstore.NewManager(walstore.ManagerConfig{Store: store, Logger: discard()})
	require.NoError(t, err)
	defer r.Close()
	bad := entries[1]
	bad.Length = size
	res, err := r.Fetch(ctx, []metadata.Entry{entries2[0], bad, entries[0], entries2[1]})
	require.NoError(t, err)
	require.ErrorIs(t, res[1].Err, storage.ErrInvalidRange)
	for i, in := range map[int]walstore.CopyInput{0: inputs2[0], 2: inputs[0], 3: inputs2[1]} {
		require.NoError(t, res[i].Err)
		clustertest.RequireSameLog(t, in.Batches, res[i].Batches)
	}
	assert.Len(t, store.gets(), 1+1+2, "the other object's one GET, this one's coalesced GET and two single ones")
}

// TestManagerSurvivesStoreThatBreaksItsContract: whatever GetRange
// answers, Fetch neither panics nor hands out bytes that are not the
// entry's; answers of the wrong size are errors matching
// ErrContractViolation and storage.ErrUnavailable that name the call. An answer
// that is wrong only for the coalesced range (a proxy that truncates
// large bodies) costs one GET per entry and no entry.
func TestManagerSurvivesStoreThatBreaksItsContract(t *testing.T) {
	ctx := context.Background()
	_, local, peer := newStores(t)
	inputs, entries := copyObject(t, local, 3)
	var one int64 // the longest section
	for _, e := range entries {
		one = max(one, e.Length)
	}
	tests := []struct {
		name string
		get  func(offset, length int64, data []byte, err error) ([]byte, error)
		// ok: every entry is served (after falling back to single reads).
		ok bool
	}{
		{"short body", func(_, _ int64, data []byte, err error) ([]byte, error) { return data[:len(data)-5], err }, false},
		{"one byte short", func(_, _ int64, data []byte, err error) ([]byte, error) { return data[:len(data)-1], err }, false},
		{"empty body", func(_, _ int64, data []byte, err error) ([]byte, error) { return data[:0], err }, false},
		{"nil body, nil error", func(_, _ int64, _ []byte, _ error) ([]byte, error) { return nil, nil }, false},
		{"long body", func(_, _ int64, data []byte, err error) ([]byte, error) { return append(data, "trailing"...), err }, false},
		{"twice the body", func(_, _ int64, data []byte, err error) ([]byte, error) { return append(data, data...), err }, false},
		{"truncates large bodies", func(_, length int64, data []byte, err error) ([]byte, error) {
			if length > one {
				return data[:one], err
			}
			return data, err
		}, true},
		{"pads large bodies", func(_, length int64, data []byte, err error) ([]byte, error) {
			if length > one {
				return append(data, 0), err
			}
			return data, err
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &recordingStore{ObjectStore: peer, get: tt.get}
			r, err := walstore.NewManager(walstore.ManagerConfig{Store: store, Logger: discard()})
			require.NoError(t, err)
			defer r.Close()
			res, err := r.Fetch(ctx, entries)
			require.NoError(t, err)
			require.Len(t, store.gets(), 1+len(entries), "one coalesced GET, then one per entry")
			for i, fr := range res {
				if tt.ok {
					require.NoError(t, fr.Err)
					clustertest.RequireSameLog(t, inputs[i].Batches, fr.Batches)
					continue
				}
				require.ErrorIs(t, fr.Err, walstore.ErrContractViolation, "entry %d", i)
				require.ErrorIs(t, fr.Err, storage.ErrUnavailable, "entry %d: a follower retries it", i)
				var de *walstore.DependencyError
				require.ErrorAs(t, fr.Err, &de)
				assert.Equal(t, "ObjectStore.GetRange", de.Dependency)
				var fe *walstore.FetchError
				require.ErrorAs(t, fr.Err, &fe)
				assert.Equal(t, entries[i].Partition, fe.Partition)
				assert.Contains(t, fr.Err.Error(), fmt.Sprintf("-byte range at offset %d of %s", entries[i].Position, entries[i].Object))
				assert.Empty(t, fr.Batches)
			}
		})
	}

	// A single entry's wrong-sized answer is not retried within Fetch.
	store := &recordingStore{ObjectStore: peer, get: tests[0].get}
	r, err := walstore.NewManager(walstore.ManagerConfig{Store: store})
	require.NoError(t, err)
	defer r.Close()
	res, err := r.Fetch(ctx, entries[:1])
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, walstore.ErrContractViolation)
	require.EqualError(t, res[0].Err, fmt.Sprintf("walstore: fetch %s bytes %d+%d for %s: ObjectStore.GetRange: walstore: dependency broke its contract: "+
		"returned %d bytes for the %d-byte range at offset %d of %s, which may be transient (walstore: object store unavailable)",
		entries[0].Object, entries[0].Position, entries[0].Length, entries[0].Partition, entries[0].Length-5, entries[0].Length, entries[0].Position, entries[0].Object))
	assert.Len(t, store.gets(), 1)
}

// TestManagerRejectsWrongPutReference: the reference Put returns is what
// followers will read, so one that is not the key Copy asked for in the
// store's local bucket fails Copy with ErrContractViolation.
func TestManagerRejectsWrongPutReference(t *testing.T) {
	ctx := context.Background()
	_, local, _ := newStores(t)
	tests := []struct {
		name  string
		put   func(metadata.ObjectRef) metadata.ObjectRef
		local *metadata.ObjectRef
	}{
		// Local and Put agree on a reference followers cannot read.
		{"no local bucket", func(r metadata.ObjectRef) metadata.ObjectRef { r.Bucket = ""; return r }, &metadata.ObjectRef{AZ: "az1"}},
		{"another bucket", func(r metadata.ObjectRef) metadata.ObjectRef { r.Bucket = "bucket-az2"; return r }, nil},
		{"no bucket", func(r metadata.ObjectRef) metadata.ObjectRef { r.Bucket = ""; return r }, nil},
		{"empty key", func(r metadata.ObjectRef) metadata.ObjectRef { r.Key = ""; return r }, nil},
		{"another key", func(r metadata.ObjectRef) metadata.ObjectRef { r.Key += "x"; return r }, nil},
		{"another AZ", func(r metadata.ObjectRef) metadata.ObjectRef { r.AZ = "az2"; return r }, nil},
		{"zero reference", func(metadata.ObjectRef) metadata.ObjectRef { return metadata.ObjectRef{} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &recordingStore{ObjectStore: local, put: tt.put, local: tt.local}
			m, err := walstore.NewManager(walstore.ManagerConfig{Store: store})
			require.NoError(t, err)
			defer m.Close()
			entries, err := m.Copy(ctx, copyInputs(2, 1))
			require.ErrorIs(t, err, walstore.ErrContractViolation)
			require.NotErrorIs(t, err, storage.ErrUnavailable)
			var de *walstore.DependencyError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, "ObjectStore.Put", de.Dependency)
			assert.Contains(t, err.Error(), "0/", "names the key")
			assert.Nil(t, entries)
		})
	}
}
