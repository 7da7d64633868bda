package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// AZs are the availability zones of every test cluster.
var AZs = []string{"az1", "az2", "az3"}

// Objects is one object-storage deployment with a bucket per AZ.
type Objects interface {
	// Store returns the view of a broker in az.
	Store(az string) (storage.ObjectStore, error)
	// SetOutage makes az's bucket unreachable, or reachable again.
	SetOutage(az string, down bool) error
}

// Backend builds the shared parts of a cluster.
type Backend struct {
	// Objects returns a fresh deployment with a bucket for each of AZs.
	Objects func(t *testing.T) Objects
	// Log returns a fresh, empty metadata log with the given partitions;
	// the cluster closes it.
	Log func(t *testing.T, partitions int32) metadata.Log
}

// Mem is the memstore backend: buckets bucket-az1..3 and a log that
// long-polls for up to 20ms.
func Mem() Backend {
	return Backend{
		Objects: func(t *testing.T) Objects {
			buckets := make(map[string]string, len(AZs))
			for _, az := range AZs {
				buckets[az] = "bucket-" + az
			}
			c, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: buckets, Seed: 1})
			require.NoError(t, err)
			return memObjects{c}
		},
		Log: func(t *testing.T, partitions int32) metadata.Log {
			l, err := memstore.NewLog(partitions, memstore.WithMaxPollWait(20*time.Millisecond))
			require.NoError(t, err)
			return l
		},
	}
}

type memObjects struct{ c *memstore.Cluster }

func (m memObjects) Store(az string) (storage.ObjectStore, error) { return m.c.Store(az) }
func (m memObjects) SetOutage(az string, down bool) error         { return m.c.SetOutage(az, down) }

// Op names an ObjectStore method, for faults.
type Op string

// The operations a Fault sees.
const (
	OpPut    Op = "put"
	OpGet    Op = "get"
	OpDelete Op = "delete"
	OpList   Op = "list"
)

// Fault decides what happens to one request of a broker's store: an added
// delay, an error instead of the request, or (for a GET) a flipped byte in
// what it returns. The zero Fault changes nothing.
type Fault struct {
	Delay   time.Duration
	Err     error
	Corrupt bool
}

// faultyStore wraps a broker's store to inject the cluster's faults and
// count GETs per bucket, whatever the backend.
type faultyStore struct {
	storage.ObjectStore
	c *Cluster
}

// newFaultyStore returns s behind the cluster's faults: a
// storage.RangeReader, whose ReadRange meets the faults GetRange does,
// when s is one, so that the brokers' followers read as they would from
// s.
func newFaultyStore(s storage.ObjectStore, c *Cluster) storage.ObjectStore {
	f := faultyStore{s, c}
	if rr, ok := s.(storage.RangeReader); ok {
		return faultyRangeStore{f, rr}
	}
	return f
}

// faultyRangeStore is a faultyStore over a storage.RangeReader.
type faultyRangeStore struct {
	faultyStore
	rr storage.RangeReader
}

func (s faultyRangeStore) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	f, err := s.fault(ctx, OpGet, ref.Bucket)
	if err != nil {
		return 0, err
	}
	n, err := s.rr.ReadRange(ctx, ref, offset, dst)
	if err == nil && f.Corrupt {
		corrupt(dst[:n])
	}
	return n, err
}

// corrupt flips a bit of b, as a Fault's Corrupt does to what a GET
// returns.
func corrupt(b []byte) {
	if len(b) > 0 {
		b[len(b)/2] ^= 0x40
	}
}

func (s faultyStore) fault(ctx context.Context, op Op, bucket string) (Fault, error) {
	s.c.mu.Lock()
	fn := s.c.fault
	if op == OpGet {
		s.c.gets[bucket]++
	}
	s.c.mu.Unlock()
	if fn == nil {
		return Fault{}, nil
	}
	f := fn(op, bucket)
	if f.Delay > 0 {
		select {
		case <-ctx.Done():
			return f, ctx.Err()
		case <-time.After(f.Delay):
		}
	}
	return f, f.Err
}

func (s faultyStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	if _, err := s.fault(ctx, OpPut, s.Local().Bucket); err != nil {
		return metadata.ObjectRef{}, err
	}
	return s.ObjectStore.Put(ctx, key, body)
}

func (s faultyStore) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	f, err := s.fault(ctx, OpGet, ref.Bucket)
	if err != nil {
		return nil, err
	}
	b, err := s.ObjectStore.GetRange(ctx, ref, offset, length)
	if err == nil && f.Corrupt {
		corrupt(b)
	}
	return b, err
}

func (s faultyStore) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	if _, err := s.fault(ctx, OpDelete, s.Local().Bucket); err != nil {
		return err
	}
	return s.ObjectStore.Delete(ctx, refs)
}

func (s faultyStore) List(ctx context.Context, bucket, prefix string) ([]storage.ObjectInfo, error) {
	if _, err := s.fault(ctx, OpList, bucket); err != nil {
		return nil, err
	}
	return s.ObjectStore.List(ctx, bucket, prefix)
}
