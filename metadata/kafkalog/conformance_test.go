package kafkalog

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metadata/metadatatest"
)

// TestLogConformance runs the suite every metadata.Log passes. Each subtest
// gets a fresh topic, created by New, on one shared in-process cluster.
func TestLogConformance(t *testing.T) {
	c := newCluster(t)
	var topics atomic.Int32
	metadatatest.Run(t, func(t *testing.T, partitions int32) metadata.Log {
		l, err := New(testContext(t), Config{
			SeedBrokers: c.ListenAddrs(),
			Topic:       fmt.Sprintf("conformance-%d", topics.Add(1)),
			Partitions:  partitions,
			CreateTopic: true,
			Logger:      quietLogger(),
		})
		require.NoError(t, err)
		return l
	})
}
