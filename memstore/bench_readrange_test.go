package memstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage/storagetest"
)

// BenchmarkReadRange compares GetRange with ReadRange into a reused buffer,
// in one run (see storagetest.BenchmarkRanges).
func BenchmarkReadRange(b *testing.B) {
	c, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1", "az2": "b2"}})
	require.NoError(b, err)
	writer, err := c.Store("az1")
	require.NoError(b, err)
	reader, err := c.Store("az2")
	require.NoError(b, err)
	storagetest.BenchmarkRanges(b, writer, reader)
}
