package walstore_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// A partition whose topic name Kafka would refuse is refused where it
// enters a Node, with an error matching metadata.ErrInvalidTopicName: each
// transition (a *TransitionError, the partition left with no role), and
// Append (which also matches ErrNotLeader, as the partition cannot be
// led). Names Kafka takes, the short ones tests use among them, are led.
func TestNodeRefusesInvalidTopicNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		n := w.start(1, walstore.NodeConfig{Local: log1})
		batch := storage.Batch{Epoch: 1, FirstOffset: 0, LastOffset: 0, Data: []byte("x")}
		for _, name := range []string{"bad name", "a/b", "..", ".", "\xff\xfe-topic", "tópico", strings.Repeat("a", metadata.MaxTopicNameLength+1)} {
			tp := metadata.TopicPartition{Topic: name, Partition: 0}
			for _, c := range []struct {
				call string
				err  error
			}{
				{"BecomeLeader", n.BecomeLeader(ctx, tp, 1, []int32{2}, -1)},
				{"BecomeFollower", n.BecomeFollower(ctx, tp, 1, 2)},
				{"StopReplica", n.StopReplica(ctx, tp)},
			} {
				require.ErrorIs(t, c.err, metadata.ErrInvalidTopicName, "%s %q", c.call, name)
				var te *walstore.TransitionError
				require.ErrorAs(t, c.err, &te, "%s %q", c.call, name)
				assert.Equal(t, c.call, te.Transition)
				assert.Equal(t, walstore.NoRole, n.Role(tp).Role, "%s %q", c.call, name)
			}
			err := n.Append(ctx, tp, batch)
			require.ErrorIs(t, err, metadata.ErrInvalidTopicName, "Append %q", name)
			require.ErrorIs(t, err, walstore.ErrNotLeader, "Append %q", name)
		}
		for _, name := range []string{"t", "topic-1", "a.b_c-D9", strings.Repeat("a", metadata.MaxTopicNameLength)} {
			tp := metadata.TopicPartition{Topic: name, Partition: 0}
			require.NoError(t, log1.AssignEpoch(tp, 1, 0), "%q", name)
			require.NoError(t, n.BecomeLeader(ctx, tp, 1, []int32{2}, -1), "%q", name)
			require.NoError(t, n.Append(ctx, tp, batch), "%q", name)
			require.NoError(t, n.WaitDurable(ctx, tp, 1, 0), "%q", name)
			require.NoError(t, n.StopReplica(ctx, tp), "%q", name)
		}
	})
}
