package kafkalog

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/activetier/activetier/metadata"
)

// replaceTopic deletes the test topic and creates it again with the same
// partition count, as an operator would with kadm: the new topic gets a
// new ID, and its offsets start at zero.
func replaceTopic(t *testing.T, c *kfake.Cluster, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := testContext(t)
	before := c.TopicInfo(testTopic).TopicID
	_, err = adm.DeleteTopic(ctx, testTopic)
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, partitions, -1, nil, testTopic)
	require.NoError(t, err)
	require.NotEqual(t, before, c.TopicInfo(testTopic).TopicID, "the re-created topic has a new ID")
}

// requireReplacedRead checks err is what a Read of a partition of the
// replaced topic returns: the replacement, and out of range so that the
// reader goes back to the low watermark.
func requireReplacedRead(t *testing.T, err error, msg string) {
	t.Helper()
	require.ErrorIs(t, err, ErrTopicReplaced, msg)
	require.ErrorIs(t, err, metadata.ErrOffsetOutOfRange, msg)
}

// TestTopicReplacedUnderOpenLog replaces the topic under a log that both
// writes and reads, as a broker's does, with records of the old topic read
// ahead. The writer must work against the new topic at once (franz-go alone
// keeps failing with UNKNOWN_TOPIC_ID until the topic is purged), and no
// Read may return a record of the old topic.
func TestTopicReplacedUnderOpenLog(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(2, testTopic))
	l := openLog(t, c, Config{Partitions: 2})
	ctx := testContext(t)
	appendN(t, l, 0, 5)
	appendN(t, l, 1, 3)
	recs, err := l.Read(ctx, 0, 0, 2)
	require.NoError(t, err)
	require.Len(t, recs, 2, "offsets 2 to 4 are now read ahead")
	readAll(t, l, 1, 0, 3, 10)

	replaceTopic(t, c, 2)

	// The first Append notices, at most once, and says so.
	off, err := l.Append(ctx, 0, []byte("new-0"))
	if err != nil {
		require.ErrorIs(t, err, ErrTopicReplaced)
		assert.Contains(t, err.Error(), "topic ID")
		off, err = l.Append(ctx, 0, []byte("new-0"))
	}
	require.NoError(t, err, "the open log appends to the new topic right away")
	assert.Equal(t, int64(0), off, "offsets restarted")

	// The read-ahead of the old topic is dropped, not returned.
	_, err = l.Read(ctx, 0, 2, 10)
	requireReplacedRead(t, err, "Read from the old position")
	assert.Contains(t, err.Error(), "[0, 1)", "the error gives the new topic's watermarks")
	recs = readAll(t, l, 0, 0, 1, 10)
	assert.Equal(t, "new-0", string(recs[0].Value))

	// Every partition read before learns it once, on its next Read.
	_, err = l.Read(ctx, 1, 3, 10)
	requireReplacedRead(t, err, "partition 1")
	recs, err = l.Read(ctx, 1, 0, 10)
	require.NoError(t, err)
	assert.Empty(t, recs, "the new partition 1 is empty")
	appendN(t, l, 1, 2)
	readAll(t, l, 1, 0, 2, 10)
}

// TestTopicReplacedSeenByReader: a log that only reads finds the
// replacement by itself, when its fetch by topic ID is refused, and a
// separate log that only writes recovers by itself too.
func TestTopicReplacedSeenByReader(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	writer := openLog(t, c, Config{Partitions: 1})
	reader := openLog(t, c, Config{Partitions: 1})
	ctx := testContext(t)
	appendN(t, writer, 0, 3)
	readAll(t, reader, 0, 0, 3, 10)

	replaceTopic(t, c, 1)
	_, err := reader.Read(ctx, 0, 3, 10)
	requireReplacedRead(t, err, "the reader's fetch with the old topic ID")
	recs, err := reader.Read(ctx, 0, 0, 10)
	require.NoError(t, err)
	assert.Empty(t, recs)

	_, tries := appendUntilAccepted(t, writer, 0, []byte("new"), ErrTopicReplaced)
	assert.LessOrEqual(t, tries, 2, "one ErrTopicReplaced at most, then the new topic")
	recs = readAll(t, reader, 0, 0, 1, 10)
	assert.Equal(t, "new", string(recs[0].Value))
}

// TestTrimAfterTopicReplaced: an offset of the old topic must not trim the
// new one, whose records nobody has read.
func TestTrimAfterTopicReplaced(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	writer := openLog(t, c, Config{Partitions: 1})
	gc := openLog(t, c, Config{Partitions: 1})
	appendN(t, writer, 0, 5)
	replaceTopic(t, c, 1)
	appendUntilAccepted(t, writer, 0, []byte("new"), ErrTopicReplaced)
	appendN(t, writer, 0, 3)

	ctx := testContext(t)
	err := gc.Trim(ctx, 0, 3)
	require.ErrorIs(t, err, ErrTopicReplaced)
	low, high, err := gc.Watermarks(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{0, 4}, [2]int64{low, high}, "nothing of the new topic was trimmed")
	require.NoError(t, gc.Trim(ctx, 0, 1), "offsets of the new topic trim as usual")
}

// TestNoteTopicID covers the ID bookkeeping, including metadata from a
// broker that has not caught up with the replacement yet.
func TestNoteTopicID(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	l := openLog(t, c, Config{Partitions: 1})
	first := l.topicID
	require.NotEqual(t, [16]byte{}, first)
	second := [16]byte{1, 2, 3}

	require.NoError(t, l.noteTopicID(first, 0), "the current ID")
	require.NoError(t, l.noteTopicID([16]byte{}, 0), "no ID: a cluster without topic IDs")
	require.ErrorIs(t, l.noteTopicID(second, 0), ErrTopicReplaced, "a new ID")
	assert.Equal(t, uint64(1), l.gen.Load())
	assert.Equal(t, second, l.topicID)
	require.ErrorIs(t, l.noteTopicID(second, 0), ErrTopicReplaced, "a caller from before the replacement")
	require.NoError(t, l.noteTopicID(second, 1))
	err := l.noteTopicID(first, 1)
	require.ErrorIs(t, err, errStaleTopicID, "the old ID again is stale metadata, not another replacement")
	assert.True(t, isRetriable(err))
	assert.Equal(t, uint64(1), l.gen.Load())
}

// TestTopicReplacedUnderConcurrentAppends: appends in flight to several
// partitions when the topic is replaced fail with ErrTopicReplaced only,
// and every writer then goes on in the new topic.
func TestTopicReplacedUnderConcurrentAppends(t *testing.T) {
	const partitions, writers = 3, 4
	c := newCluster(t, kfake.SeedTopics(partitions, testTopic))
	l := openLog(t, c, Config{Partitions: partitions})
	ctx := testContext(t)
	replaced := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			after := 0
			for i := 0; after < 5; i++ {
				select {
				case <-replaced:
					after++
				default:
				}
				_, err := l.Append(ctx, int32((w+i)%partitions), []byte{byte(w), byte(i)})
				if err != nil && !errors.Is(err, ErrTopicReplaced) {
					errs <- err
					return
				}
			}
		})
	}
	_, err := l.Append(ctx, 0, []byte("before"))
	require.NoError(t, err)
	replaceTopic(t, c, partitions)
	close(replaced)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// The last appends of every writer went to the new topic.
	var total int64
	for p := range int32(partitions) {
		_, high, err := l.Watermarks(ctx, p)
		require.NoError(t, err)
		total += high
	}
	assert.GreaterOrEqual(t, total, int64(writers))
}
