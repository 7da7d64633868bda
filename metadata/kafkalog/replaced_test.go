package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

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

// replaceAndRefill deletes the test topic and creates it again with
// partitions partitions, straight on the cluster, and appends n records
// "new-<i>" to partition 0 of the new topic through writer. It reports
// failures instead of ending the test, for it may run off the test's
// goroutine (in a kfake control's wakeup).
func replaceAndRefill(ctx context.Context, c *kfake.Cluster, writer *Log, partitions int32, n int) error {
	before := c.TopicInfo(testTopic).TopicID
	if err := c.DeleteTopic(testTopic); err != nil {
		return err
	}
	if err := c.CreateTopic(testTopic, partitions, nil); err != nil {
		return err
	}
	if c.TopicInfo(testTopic).TopicID == before {
		return errors.New("the re-created topic has the old ID")
	}
	for i := 0; i < n; {
		_, err := writer.Append(ctx, 0, fmt.Appendf(nil, "new-%d", i))
		switch {
		case err == nil:
			i++
		case !errors.Is(err, ErrTopicReplaced) && !errors.Is(err, ErrUnavailable):
			return fmt.Errorf("append %d to the new topic: %w", i, err)
		}
	}
	return nil
}

// TestTopicReplacedAtEveryPointOfARead replaces the topic under a reader
// (a log that makes no other call, while another log writes) at each
// point of a Read: before it, with and without records read ahead, when
// the reader asks for metadata, when its fetch reaches the broker, and
// while the broker holds its long poll; and to a topic with the same,
// fewer or more partitions. No Read may return a record of the old topic
// once the replacement is done, and the reader must learn of it
// (ErrTopicReplaced) before it reads records of the new topic from its
// old position, then read those from the new topic's start.
func TestTopicReplacedAtEveryPointOfARead(t *testing.T) {
	type point int
	const (
		before point = iota
		atMetadata
		atFetch
		duringLongPoll
	)
	for _, tt := range []struct {
		name          string
		at            point
		readAhead     bool // the reader holds records of the old topic read ahead
		after         int32
		read          int32 // the partition the reader reads
		partitionGone bool
		fetchByName   bool // the brokers fetch by topic name (before Kafka 3.1)
	}{
		{"before, records read ahead", before, true, 2, 0, false, false},
		{"before, nothing read ahead", before, false, 2, 0, false, false},
		{"at its metadata request", atMetadata, false, 2, 0, false, false},
		{"at its fetch, records read ahead", atFetch, true, 2, 0, false, false},
		{"at its fetch, nothing read ahead", atFetch, false, 2, 0, false, false},
		{"during its long poll", duringLongPoll, false, 2, 0, false, false},
		{"before, records read ahead, more partitions", before, true, 3, 0, false, false},
		{"before, records read ahead, fewer partitions", before, true, 1, 0, false, false},
		{"before, records read ahead of a partition that goes", before, true, 1, 1, true, false},
		{"fetch by name, before, records read ahead", before, true, 2, 0, false, true},
		{"fetch by name, before, nothing read ahead", before, false, 2, 0, false, true},
		{"fetch by name, at its fetch", atFetch, false, 2, 0, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			opts := []kfake.Opt{kfake.SeedTopics(2, testTopic)}
			if tt.fetchByName {
				v := kversion.Stable()
				v.SetMaxKeyVersion(int16(kmsg.Fetch), 12)
				opts = append(opts, kfake.MaxVersions(v))
			}
			c := newCluster(t, opts...)
			writer := openLog(t, c, Config{Partitions: 2})
			reader := openLog(t, c, Config{Partitions: 2, ReadWait: 500 * time.Millisecond})
			appendN(t, writer, tt.read, 5)
			pos := int64(5) // at the end: a long poll
			switch {
			case tt.readAhead:
				recs, err := reader.Read(ctx, tt.read, 0, 2)
				require.NoError(t, err)
				require.Len(t, recs, 2, "offsets 2 to 4 are now read ahead")
				pos = 2
			case tt.at != atMetadata:
				readAll(t, reader, tt.read, 0, 5, 5) // the reader knows the leader
			}

			replace := func() error { return replaceAndRefill(ctx, c, writer, tt.after, 6) }
			done := make(chan error, 1) // the replacement's outcome
			var fired atomic.Bool
			control := func(kmsg.Request) (kmsg.Response, error, bool) {
				if fired.CompareAndSwap(false, true) {
					c.SleepControl(func() { done <- replace() })
				}
				return nil, nil, false
			}
			switch tt.at {
			case before:
				done <- replace()
			case atMetadata:
				c.ControlKey(int16(kmsg.Metadata), control)
			case atFetch:
				c.ControlKey(int16(kmsg.Fetch), control)
			case duringLongPoll:
				// The broker holds the fetch for ReadWait.
				time.AfterFunc(100*time.Millisecond, func() { done <- replace() })
			}

			replaced := false
			var got []metadata.Record
			for tries := 0; len(got) < 6 && tries < 20; tries++ {
				recs, err := reader.Read(ctx, tt.read, pos, 10)
				if tries == 0 {
					select {
					case err := <-done:
						require.NoError(t, err, "replacing the topic")
					case <-ctx.Done():
						t.Fatal("the topic was not replaced during the first Read")
					}
				}
				for _, r := range recs {
					require.True(t, strings.HasPrefix(string(r.Value), "new-"), "Read %d from %d returned %q at offset %d: a record of the old topic", tries, pos, r.Value, r.Offset)
					require.True(t, replaced, "records of the new topic read from a position in the old one, without ErrTopicReplaced")
				}
				got = append(got, recs...)
				pos += int64(len(recs))
				switch {
				case tt.partitionGone && err != nil:
					require.NotErrorIs(t, err, ErrUnavailable, "a partition that is no more is not an outage")
					if !replaced {
						requireReplacedRead(t, err, "the first Read after the replacement")
						replaced = true
						continue
					}
					require.ErrorIs(t, err, ErrPartitionCount, "then the partition count that disagrees")
					return // and no record of the old topic came
				case errors.Is(err, ErrTopicReplaced):
					requireReplacedRead(t, err, "a Read that learns of the replacement")
					require.False(t, replaced, "ErrTopicReplaced once")
					replaced, pos = true, 0
				default:
					require.NoError(t, err)
				}
			}
			require.False(t, tt.partitionGone, "a partition that is no more has no records")
			require.True(t, replaced)
			want := make([][]byte, 6)
			for i := range want {
				want[i] = fmt.Appendf(nil, "new-%d", i)
			}
			if tt.read == 0 {
				assert.Equal(t, want, valuesOf(got))
			}
		})
	}
}
