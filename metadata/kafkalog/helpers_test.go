package kafkalog

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	"github.com/activetier/activetier/metadata"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTopic is the topic the tests seed; New's default topic is used where
// the test is about the default.
const testTopic = "wal-meta"

// testTimeout bounds every test context; reaching it is a failure.
const testTimeout = 20 * time.Second

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newCluster starts an in-process Kafka with one broker unless opts say
// otherwise, closed when the test ends.
func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// quietLogger keeps franz-go's connection chatter out of test output.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openLog creates a log on c with cfg, filling in the brokers, the test
// topic and a quiet logger where cfg leaves them empty, and closes it when
// the test ends.
func openLog(t testing.TB, c *kfake.Cluster, cfg Config) *Log {
	t.Helper()
	if len(cfg.SeedBrokers) == 0 {
		cfg.SeedBrokers = c.ListenAddrs()
	}
	if cfg.Topic == "" {
		cfg.Topic = testTopic
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	l, err := New(testContext(t), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// appendN appends n values to partition and checks their offsets follow
// the partition's high watermark.
func appendN(t testing.TB, l *Log, partition int32, n int) [][]byte {
	t.Helper()
	ctx := testContext(t)
	_, high, err := l.Watermarks(ctx, partition)
	require.NoError(t, err)
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = fmt.Appendf(nil, "p%d-o%d", partition, high+int64(i))
		off, err := l.Append(ctx, partition, vals[i])
		require.NoError(t, err, "Append(partition %d) #%d", partition, i)
		require.Equal(t, high+int64(i), off, "offset of append #%d to partition %d", i, partition)
	}
	return vals
}

// readAll reads n records of partition from offset from, limit per Read,
// and checks offsets are dense.
func readAll(t testing.TB, l *Log, partition int32, from int64, n, limit int) []metadata.Record {
	t.Helper()
	ctx := testContext(t)
	var out []metadata.Record
	for len(out) < n {
		next := from + int64(len(out))
		recs, err := l.Read(ctx, partition, next, limit)
		require.NoError(t, err, "Read(partition %d, from %d, max %d)", partition, next, limit)
		require.LessOrEqual(t, len(recs), limit)
		for i, r := range recs {
			require.Equal(t, partition, r.Partition)
			require.Equal(t, next+int64(i), r.Offset)
		}
		out = append(out, recs...)
	}
	require.Len(t, out, n)
	return out
}

func valuesOf(recs []metadata.Record) [][]byte {
	out := make([][]byte, len(recs))
	for i, r := range recs {
		out[i] = r.Value
	}
	return out
}
