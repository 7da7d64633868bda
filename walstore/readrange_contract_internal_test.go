package walstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/bufpool"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// breakingStore is a rangeStore whose ReadRange answers as read says,
// after copying the range into dst.
type breakingStore struct {
	*rangeStore
	read func(dst []byte) (int, error)
}

func (s *breakingStore) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	if _, err := s.rangeStore.ReadRange(ctx, ref, offset, dst); err != nil {
		return 0, err
	}
	return s.read(dst)
}

// TestFetchFromAReadRangeThatBreaksItsContract: whatever a ReadRange
// returns, or if it panics, each entry of the read fails with an error
// naming ObjectStore.ReadRange and matching what it broke, no batch is
// returned, and the buffer never goes back to the pool: a read that did
// not succeed may have left a request writing into it. GetRange
// panicking is caught alike.
func TestFetchFromAReadRangeThatBreaksItsContract(t *testing.T) {
	errFailed := errors.New("the store failed")
	for _, tc := range []struct {
		name     string
		read     func(dst []byte) (int, error)
		getPanic bool // GetRange panics, and Fetch (no pool) calls it
		want     []error
		call     string
	}{
		{name: "more bytes than dst", read: func(dst []byte) (int, error) { return len(dst) + 1, nil },
			want: []error{ErrContractViolation, storage.ErrUnavailable}},
		{name: "fewer bytes without an error", read: func(dst []byte) (int, error) { return len(dst) / 2, nil },
			want: []error{ErrContractViolation, storage.ErrUnavailable}},
		{name: "no bytes without an error", read: func([]byte) (int, error) { return 0, nil },
			want: []error{ErrContractViolation}},
		{name: "a negative count", read: func([]byte) (int, error) { return -1, nil },
			want: []error{ErrContractViolation}},
		{name: "every byte, with an error", read: func(dst []byte) (int, error) { return len(dst), errFailed },
			want: []error{errFailed}},
		{name: "some bytes, with an error", read: func(dst []byte) (int, error) { return 3, errFailed },
			want: []error{errFailed}},
		{name: "panics", read: func([]byte) (int, error) { panic("the store's bug") },
			want: []error{ErrContractViolation, storage.ErrUnavailable}},
		{name: "GetRange panics", getPanic: true, call: "ObjectStore.GetRange",
			want: []error{ErrContractViolation, storage.ErrUnavailable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rs := &rangeStore{objects: map[string][]byte{}}
			var store storage.ObjectStore = &breakingStore{rangeStore: rs, read: tc.read}
			if tc.getPanic {
				store = panickingGet{rs}
			}
			m, err := NewManager(ManagerConfig{Store: store, BrokerID: 1})
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
			if tc.getPanic {
				res, err = m.Fetch(ctx, entries)
			} else {
				res, err = m.fetch(ctx, entries, pool)
			}
			require.NoError(t, err)
			call := tc.call
			if call == "" {
				call = "ObjectStore.ReadRange"
			}
			for i, r := range res {
				var de *DependencyError
				require.ErrorAs(t, r.Err, &de, "entry %d", i)
				assert.Equal(t, call, de.Dependency, "entry %d", i)
				for _, w := range tc.want {
					assert.ErrorIs(t, r.Err, w, "entry %d", i)
				}
				assert.Empty(t, r.Batches, "entry %d", i)
				assert.Nil(t, r.buf, "entry %d", i)
			}
			assert.Zero(t, pool.Free(), "a buffer the failed read had is never read into again")
		})
	}
}

// panickingGet is a store whose GetRange panics and which reads no range
// into a caller's buffer.
type panickingGet struct{ *rangeStore }

func (panickingGet) GetRange(context.Context, metadata.ObjectRef, int64, int64) ([]byte, error) {
	panic("the store's bug")
}

func (panickingGet) ReadRange() {} // hides rangeStore's: not a RangeReader
