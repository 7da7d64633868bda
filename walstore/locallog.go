package walstore

import (
	"context"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
)

// LocalLog is the broker's own log, the only part of the broker the engines
// touch. The follower appends fetched batches to it and truncates it on
// divergence; the leader reads it to republish after a failover. A Kafka
// broker implements it over its partitions' UnifiedLog and leader-epoch
// cache.
type LocalLog interface {
	// EndOffset returns the offset the next record of tp will get.
	EndOffset(tp metadata.TopicPartition) (int64, error)
	// Epochs returns the leader epochs of tp's local records, ascending, as
	// Kafka's leader-epoch checkpoint stores them. It must survive
	// restarts: a follower rebuilds its fencing state from it.
	Epochs(tp metadata.TopicPartition) ([]fencing.EpochEntry, error)
	// Append adds batches that continue tp's log exactly at EndOffset and
	// records any new epoch they start.
	Append(ctx context.Context, tp metadata.TopicPartition, batches []combiner.Batch) error
	// Truncate removes tp's records at and after offset, and the epochs
	// that start there.
	Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error
	// Read returns whole batches of tp starting with the one that holds
	// offset from, up to about maxBytes (at least one batch if any exists).
	Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]combiner.Batch, error)
}
