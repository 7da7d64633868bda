package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
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

// brokerStore returns s, a broker's store, behind the cluster's faults
// (SetFault), counting its GETs per bucket whatever the backend: a
// storage.RangeReader, whose ReadRange meets the faults GetRange does,
// when s is one, so that the brokers' followers read as they would from
// s.
func (c *Cluster) brokerStore(s storage.ObjectStore) storage.ObjectStore {
	return faults.WrapStore(s, faults.Any(faults.Func(c.countGet), &c.faults))
}

// countGet counts a GET, before any fault decides its fate.
func (c *Cluster) countGet(_ context.Context, r faults.Request) faults.Effect {
	if r.Op.IsGet() {
		c.mu.Lock()
		c.gets[r.Bucket]++
		c.mu.Unlock()
	}
	return faults.Effect{}
}
