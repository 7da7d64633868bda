package metadata

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Split calls followers once per item and routing pass; a followers
// function whose answer changes between calls (a broker's replica
// assignment updated concurrently) must give an error or a consistent
// split, never a panic.
func TestSplitFollowersChangingBetweenCallsDoesNotPanic(t *testing.T) {
	p, err := NewPartitioner(4)
	require.NoError(t, err)
	tp := TopicPartition{Topic: "t", Partition: 0}
	m := &Message{WriterBrokerID: 1,
		Commits: []Commit{{Partition: tp, Epoch: 1, Offset: 10}}}
	calls := 0
	followers := func(TopicPartition) []int32 {
		calls++
		return []int32{int32(calls)} // another broker each call
	}
	require.NotPanics(t, func() { _, _ = p.Split(m, followers) })
}
