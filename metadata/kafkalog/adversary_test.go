package kafkalog

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/activetier/activetier/metadata"
)

// The topic replaced by one of another partition count under an open
// log that reads and appends: no Read returns a record of the old topic,
// every error is typed, and no Append lands where the log's partitioner
// does not expect it (an acknowledged offset is one the new topic's
// partition holds, with the value appended).
func TestAdversaryTopicReplacedWithOtherPartitionCount(t *testing.T) {
	for _, parts := range []int32{1, 4} {
		t.Run(fmt.Sprint(parts), func(t *testing.T) {
			c := newCluster(t, kfake.SeedTopics(2, testTopic))
			l := openLog(t, c, Config{Partitions: 2})
			ctx := testContext(t)
			appendN(t, l, 0, 5)
			appendN(t, l, 1, 5)
			recs, err := l.Read(ctx, 1, 0, 1)
			require.NoError(t, err)
			require.Len(t, recs, 1, "offsets 1 to 4 of partition 1 are read ahead")
			replaceTopic(t, c, parts)

			for p := range int32(2) {
				for range 5 {
					off, err := l.Append(ctx, p, []byte(fmt.Sprintf("new-%d", p)))
					if err != nil {
						t.Logf("Append(%d): %v", p, err)
						assert.True(t, errors.Is(err, ErrTopicReplaced) || errors.Is(err, ErrPartitionCount) || errors.Is(err, metadata.ErrUnknownPartition) || errors.Is(err, ErrUnavailable),
							"untyped Append error: %v", err)
						if p >= parts {
							assert.True(t, errors.Is(err, ErrTopicReplaced) || errors.Is(err, ErrPartitionCount),
								"an Append to a partition the new topic lacks: %v", err)
						}
						continue
					}
					require.Less(t, p, parts, "an Append to partition %d acknowledged at %d, which the new topic does not have", p, off)
					got, err := l.Read(ctx, p, off, 1)
					if err != nil {
						require.ErrorIs(t, err, metadata.ErrOffsetOutOfRange, "Read(%d, %d)", p, off)
						continue
					}
					require.Len(t, got, 1)
					require.Equal(t, []byte(fmt.Sprintf("new-%d", p)), got[0].Value, "partition %d offset %d", p, off)
				}
			}
			for p := range int32(2) {
				recs, err := l.Read(ctx, p, 1, 100)
				t.Logf("Read(%d, 1) after: %d records, %v", p, len(recs), err)
				for _, r := range recs {
					require.False(t, bytes.HasPrefix(r.Value, []byte("p")), "a record of the old topic: %q", r.Value)
				}
			}
			_, _, err = l.Watermarks(ctx, 1)
			t.Logf("Watermarks(1): %v", err)
		})
	}
}

// Partitions added to the topic under an open log (Kafka cannot remove
// them): the log goes on with its own count, reads and appends dense
// offsets, and a new log with the old count is refused with a
// *PartitionCountError.
func TestAdversaryPartitionsAddedUnderOpenLog(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(2, testTopic))
	l := openLog(t, c, Config{Partitions: 2})
	ctx := testContext(t)
	want := appendN(t, l, 1, 5)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreatePartitions(ctx, 2, testTopic)
	require.NoError(t, err)
	want = append(want, appendN(t, l, 1, 5)...)
	require.Equal(t, want, valuesOf(readAll(t, l, 1, 0, 10, 3)))
	require.Equal(t, int32(2), l.Partitions())
	_, err = New(ctx, Config{SeedBrokers: c.ListenAddrs(), Topic: testTopic, Partitions: 2, Logger: quietLogger()})
	var pce *PartitionCountError
	require.ErrorAs(t, err, &pce)
	require.ErrorIs(t, err, ErrPartitionCount)
}

// A Read with the largest limit there is returns what the partition
// holds, without trying to allocate for the limit.
func TestAdversaryReadHugeLimit(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	l := openLog(t, c, Config{Partitions: 1})
	want := appendN(t, l, 0, 7)
	for _, max := range []int{math.MaxInt32, math.MaxInt} {
		recs, err := l.Read(testContext(t), 0, 0, max)
		require.NoError(t, err)
		require.Equal(t, want, valuesOf(recs))
	}
	for _, max := range []int{0, -1, math.MinInt} {
		_, err := l.Read(testContext(t), 0, 0, max)
		require.Error(t, err, "max %d", max)
	}
}

// Trim racing reads and appends, from another log as garbage collection
// on another broker would: every record a Read returns is at an offset
// no Trim finished before the Read began had removed, carries the value
// appended there, and offsets are dense; a Read from trimmed offsets is
// ErrOffsetOutOfRange, after which the reader goes on from the low
// watermark.
func TestAdversaryTrimRacingRead(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	reader := openLog(t, c, Config{Partitions: 1})
	gc := openLog(t, c, Config{Partitions: 1})
	ctx := testContext(t)
	const total = 400
	values := appendN(t, reader, 0, total)
	var trimmed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for to := int64(3); to < total-20; to += 7 {
			if !assert.NoError(t, gc.Trim(ctx, 0, to)) {
				return
			}
			trimmed.Store(to)
		}
	})
	next, outOfRange, read := int64(0), 0, 0
	for next < total {
		floor := trimmed.Load()
		recs, err := reader.Read(ctx, 0, next, 1+int(next%5))
		if err != nil {
			require.ErrorIs(t, err, metadata.ErrOffsetOutOfRange)
			outOfRange++
			low, _, err := reader.Watermarks(ctx, 0)
			require.NoError(t, err)
			require.Greater(t, low, next)
			next = low
			continue
		}
		for i, r := range recs {
			require.Equal(t, next+int64(i), r.Offset)
			require.GreaterOrEqual(t, r.Offset, floor, "a record trimmed before the Read began")
			require.Equal(t, values[r.Offset], r.Value)
		}
		next += int64(len(recs))
		read += len(recs)
	}
	wg.Wait()
	t.Logf("read %d records, %d out of range", read, outOfRange)
}
