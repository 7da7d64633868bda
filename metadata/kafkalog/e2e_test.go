package kafkalog

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/metadata"
)

// TestScenariosOverKafka runs walstore's leader and follower engines with
// this package's log as the metadata transport, through all seven failure
// scenarios of docs/design.md (memstore buckets, an in-process Kafka cluster):
// in particular the zombie leader and the out-of-order republish, where the
// transport's ordering matters most.
func TestScenariosOverKafka(t *testing.T) {
	clustertest.RunScenarios(t, clustertest.Backend{
		Objects: clustertest.Mem().Objects,
		Log: func(t *testing.T, partitions int32) metadata.Log {
			kafka := newCluster(t, kfake.SeedTopics(partitions, testTopic))
			return openLog(t, kafka, Config{Partitions: partitions, ReadWait: 100 * time.Millisecond})
		},
	})
}
