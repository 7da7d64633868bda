package walstore

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/bufpool"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// rangeStore is an in-package ObjectStore and RangeReader (memstore
// imports walstore, so tests here cannot use it) whose ReadRange can
// answer short or fail.
type rangeStore struct {
	objects      map[string][]byte
	short        int   // ReadRange reports this many bytes fewer
	err          error // ReadRange fails with it
	gets, reads  int
	corruptAfter int // flip the byte at this offset of every read, if > 0
}

func (s *rangeStore) Local() metadata.ObjectRef { return metadata.ObjectRef{AZ: "az1", Bucket: "b1"} }

func (s *rangeStore) Put(_ context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	s.objects[key] = bytes.Clone(body)
	return metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: key}, nil
}

func (s *rangeStore) GetRange(_ context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	s.gets++
	obj := s.objects[ref.Key]
	if offset+length > int64(len(obj)) {
		return nil, fmt.Errorf("range past the end of a %d-byte object: %w", len(obj), storage.ErrInvalidRange)
	}
	return bytes.Clone(obj[offset : offset+length]), nil
}

func (s *rangeStore) ReadRange(_ context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	s.reads++
	if s.err != nil {
		return 0, s.err
	}
	copy(dst, s.objects[ref.Key][offset:])
	if s.corruptAfter > 0 {
		dst[s.corruptAfter] ^= 0xff
	}
	return len(dst) - s.short, nil
}

func (s *rangeStore) Delete(context.Context, []metadata.ObjectRef) error { return nil }
func (s *rangeStore) List(context.Context, string, string) ([]storage.ObjectInfo, error) {
	return nil, nil
}

// TestFetchIntoPooledBuffers: the follower's fetch reads each coalesced
// range into one pooled buffer that every entry decoded from it holds;
// the buffer goes back to the pool at once when no entry holds it
// (compressed sections, or every section corrupt) and after the last
// release otherwise; never after a failed or wrong-sized read, which may
// have left a request writing into it.
func TestFetchIntoPooledBuffers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		codec     metadata.Codec
		store     rangeStore
		public    bool  // through Fetch, which does not pool
		wantErr   error // every entry fails with it
		wantHolds int   // entries holding the buffer
		arena     bool  // they hold the read's decompression arena; the GET buffer went back at once
		wantReads int
	}{
		{name: "uncompressed sections hold the buffer", wantHolds: 3, wantReads: 1},
		{name: "compressed sections hold an arena of their own", codec: metadata.CodecZstd, wantHolds: 3, arena: true, wantReads: 1},
		{name: "a short answer is a broken contract", store: rangeStore{short: 1}, wantErr: ErrContractViolation, wantReads: 4},
		{name: "a failed read", store: rangeStore{err: fmt.Errorf("boom: %w", storage.ErrUnavailable)}, wantErr: storage.ErrUnavailable, wantReads: 1},
		{name: "a corrupt section fails alone", store: rangeStore{corruptAfter: 40}, wantHolds: 2, wantReads: 1},
		{name: "a corrupt compressed section fails alone", codec: metadata.CodecZstd, store: rangeStore{corruptAfter: 40}, wantHolds: 2, arena: true, wantReads: 1},
		{name: "Fetch reads with GetRange", public: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := tc.store
			store.objects = map[string][]byte{}
			m, err := NewManager(ManagerConfig{Store: &store, BrokerID: 1, Codec: tc.codec})
			require.NoError(t, err)
			defer m.Close()
			var inputs []CopyInput
			for p := range 3 {
				tp := metadata.TopicPartition{Topic: "t", Partition: int32(p)}
				data := bytes.Repeat([]byte(fmt.Sprintf("partition %d ", p)), 200)
				inputs = append(inputs, CopyInput{Partition: tp, PublisherEpoch: 1,
					Batches: []storage.Batch{{Epoch: 1, FirstOffset: 0, LastOffset: 9, Data: data}}})
			}
			entries, err := m.Copy(ctx, inputs)
			require.NoError(t, err)
			pool := bufpool.New(1 << 30)
			var res []FetchResult
			if tc.public {
				res, err = m.Fetch(ctx, entries)
			} else {
				res, err = m.fetch(ctx, entries, pool)
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantReads, store.reads)
			if tc.public {
				require.Equal(t, 1, store.gets)
			}
			var holders []*sharedBuf
			for i, r := range res {
				if tc.wantErr != nil {
					require.ErrorIs(t, r.Err, tc.wantErr, "entry %d", i)
					require.Nil(t, r.buf)
					continue
				}
				if r.Err != nil {
					require.ErrorIs(t, r.Err, ErrCorrupt, "entry %d", i)
					require.Nil(t, r.buf)
					continue
				}
				require.Equal(t, inputs[i].Batches[0].Data, r.Batches[0].Data, "entry %d", i)
				if r.buf != nil {
					holders = append(holders, r.buf)
				}
			}
			require.Len(t, holders, tc.wantHolds)
			if len(holders) == 0 {
				switch {
				case tc.public:
				case tc.wantErr != nil:
					require.Zero(t, pool.Free(), "the buffer of a failed read is never read into again")
				default:
					require.Equal(t, 1, pool.Free(), "the buffer went back at once")
				}
				return
			}
			want := 0
			if tc.arena {
				want = 1 // the GET buffer went back at once
			}
			for _, h := range holders[1:] {
				require.Same(t, holders[0], h, "one buffer for the coalesced range")
			}
			for i, h := range holders {
				require.Equal(t, want, pool.Free(), "back in the pool with %d of %d holds left", len(holders)-i, len(holders))
				h.Release()
			}
			require.Equal(t, want+1, pool.Free())
			require.Panics(t, func() { holders[0].Release() }, "a release without a hold")
		})
	}
}

// TestFetchLongRangeNotPooled: a range longer than maxPooledRead, which
// only a malformed entry names, is not read into a buffer allocated before
// the store answers: it goes to GetRange, which refuses it.
func TestFetchLongRangeNotPooled(t *testing.T) {
	store := &rangeStore{objects: map[string][]byte{"k": make([]byte, 10)}}
	m, err := NewManager(ManagerConfig{Store: store, BrokerID: 1})
	require.NoError(t, err)
	defer m.Close()
	_, sb, err := m.getRange(context.Background(), metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: "k"}, 0, maxPooledRead+1, bufpool.New(1<<30))
	require.Nil(t, sb)
	require.Zero(t, store.reads)
	require.Equal(t, 1, store.gets)
	require.ErrorIs(t, err, storage.ErrInvalidRange)
}
