package kafkalog

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/metadata"
)

// Short bounds for the fault tests, so that each failing call returns
// quickly; the test context (testTimeout) is far longer, so a call that
// reaches it has not been bounded by the log. They leave room for a
// recovery (metadata, a producer epoch bump, the produce) on a loaded
// machine under the race detector.
const (
	faultDeliveryTimeout = time.Second
	faultRequestTimeout  = 500 * time.Millisecond
)

// switchableFault is a kfake control that, while on, answers every request
// of key by closing the connection (drop) or by never answering (mute),
// and while off lets the cluster handle it.
type switchableFault struct {
	on atomic.Bool
}

func installConnFault(c *kfake.Cluster, key int16, mute bool) *switchableFault {
	f := &switchableFault{}
	f.on.Store(true)
	c.ControlKey(key, func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !f.on.Load() {
			return nil, nil, false
		}
		if mute {
			// Handled without a response or an error: the broker
			// reads on and the request is never answered.
			return nil, nil, true
		}
		return nil, errors.New("injected: connection dropped"), true
	})
	return f
}

// requireUnavailable checks err is the log's own timeout or retriable
// failure, and not the caller's context.
func requireUnavailable(t *testing.T, err error, msg string) {
	t.Helper()
	require.ErrorIs(t, err, ErrUnavailable, msg)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "%s: the caller's context did not end", msg)
	assert.NotErrorIs(t, err, context.Canceled, msg)
	assert.NotErrorIs(t, err, metadata.ErrClosed, msg)
}

// TestAppendBoundedWhileKafkaRejects holds Kafka in a state where a
// produce never succeeds, checks that Append gives up within the delivery
// timeout with ErrUnavailable (franz-go alone retries forever), then lifts
// the fault and checks the same Log appends again and the record is read
// back.
func TestAppendBoundedWhileKafkaRejects(t *testing.T) {
	faults := []struct {
		name    string
		install func(c *kfake.Cluster) (remove func())
	}{
		{"not enough replicas", func(c *kfake.Cluster) func() {
			return c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: testTopic, Err: kerr.NotEnoughReplicas, Count: -1}).Remove
		}},
		{"not leader", func(c *kfake.Cluster) func() {
			return c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: testTopic, Err: kerr.NotLeaderForPartition, Count: -1}).Remove
		}},
		{"storage error", func(c *kfake.Cluster) func() {
			return c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: testTopic, Err: kerr.KafkaStorageError, Count: -1}).Remove
		}},
		{"connection dropped", func(c *kfake.Cluster) func() {
			f := installConnFault(c, int16(kmsg.Produce), false)
			return func() { f.on.Store(false) }
		}},
		{"no answer", func(c *kfake.Cluster) func() {
			f := installConnFault(c, int16(kmsg.Produce), true)
			return func() { f.on.Store(false) }
		}},
		{"every request dropped", func(c *kfake.Cluster) func() {
			f := installConnFault(c, -1, false)
			return func() { f.on.Store(false) }
		}},
	}
	for _, tt := range faults {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, kfake.SeedTopics(2, testTopic))
			l := openLog(t, c, Config{Partitions: 2, DeliveryTimeout: faultDeliveryTimeout, RequestTimeout: faultRequestTimeout})
			appendN(t, l, 0, 2)
			remove := tt.install(c)

			ctx := testContext(t)
			for i := range 3 {
				_, err := l.Append(ctx, 0, []byte("during"))
				requireUnavailable(t, err, "Append during the fault")
				if i == 0 {
					assert.Contains(t, err.Error(), "Config.DeliveryTimeout", "the first Append waits out its own bound")
					assert.Contains(t, err.Error(), "may still be stored")
				}
			}
			_, err := l.Append(ctx, 1, []byte("other partition"))
			requireUnavailable(t, err, "Append to another partition during the fault")

			remove()
			off, tries := appendUntilAccepted(t, l, 0, []byte("after"), ErrUnavailable)
			t.Logf("accepted after the fault on try %d", tries)
			// Appends abandoned during the fault may have been stored
			// after all (their requests were retried when Kafka came
			// back); never more of them than were made.
			assert.GreaterOrEqual(t, off, int64(2))
			assert.LessOrEqual(t, off, int64(2+3+tries-1))
			recs := readAll(t, l, 0, 0, int(off)+1, 100)
			assert.Equal(t, "after", string(recs[off].Value))
			for _, r := range recs[2:off] {
				assert.Contains(t, []string{"during", "after"}, string(r.Value))
			}
			_, err = l.Append(ctx, 1, []byte("other after"))
			require.NoError(t, err)
		})
	}
}

// TestCallsBoundedWhileBrokerUnreachable drops or ignores every request to
// the only broker, and checks that each call of the log returns
// ErrUnavailable within its bound and works again once the broker does.
func TestCallsBoundedWhileBrokerUnreachable(t *testing.T) {
	for _, mute := range []bool{false, true} {
		name := map[bool]string{false: "connections dropped", true: "no answers"}[mute]
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, kfake.SeedTopics(1, testTopic))
			l := openLog(t, c, Config{Partitions: 1, DeliveryTimeout: faultDeliveryTimeout, RequestTimeout: faultRequestTimeout, ReadWait: 50 * time.Millisecond})
			want := appendN(t, l, 0, 3)
			f := installConnFault(c, -1, mute)

			ctx := testContext(t)
			_, err := l.Append(ctx, 0, []byte("x"))
			requireUnavailable(t, err, "Append")
			_, _, err = l.Watermarks(ctx, 0)
			requireUnavailable(t, err, "Watermarks")
			_, err = l.Read(ctx, 0, 0, 10)
			requireUnavailable(t, err, "Read")
			err = l.Trim(ctx, 0, 1)
			requireUnavailable(t, err, "Trim")

			f.on.Store(false)
			off, tries := appendUntilAccepted(t, l, 0, []byte("after"), ErrUnavailable)
			t.Logf("accepted after the fault on try %d", tries)
			_, high, err := l.Watermarks(ctx, 0)
			require.NoError(t, err)
			assert.Equal(t, off+1, high)
			got := readAll(t, l, 0, 0, int(high), int(high))
			assert.Equal(t, want, valuesOf(got[:3]))
			assert.Equal(t, "after", string(got[off].Value))
			require.NoError(t, l.Trim(ctx, 0, 1))
		})
	}
}

// TestReadAndWatermarksRetriableErrorsAreUnavailable checks that broker
// answers Kafka marks retriable, once the log's retries are used up, come
// back as ErrUnavailable with the broker's error.
func TestReadAndWatermarksRetriableErrorsAreUnavailable(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	l := openLog(t, c, Config{Partitions: 1, RequestTimeout: faultRequestTimeout})
	appendN(t, l, 0, 2)
	ctx := testContext(t)
	for _, key := range []kmsg.Key{kmsg.Fetch, kmsg.ListOffsets} {
		h := c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Topic: testTopic, Err: kerr.NotLeaderForPartition, Count: -1})
		var err error
		if key == kmsg.Fetch {
			_, err = l.Read(ctx, 0, 0, 10)
		} else {
			_, _, err = l.Watermarks(ctx, 0)
		}
		h.Remove()
		requireUnavailable(t, err, key.Name())
		assert.ErrorIs(t, err, kerr.NotLeaderForPartition, key.Name())
	}
	readAll(t, l, 0, 0, 2, 10)
}

// TestCallerDeadlineIsNotUnavailable: when the caller's context ends
// before the log's bound, the error is the caller's, not the store's.
func TestCallerDeadlineIsNotUnavailable(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	l := openLog(t, c, Config{Partitions: 1}) // default bounds, seconds
	appendN(t, l, 0, 1)
	f := installConnFault(c, -1, true)
	defer f.on.Store(false)
	ctx, cancel := context.WithTimeout(testContext(t), 100*time.Millisecond)
	defer cancel()
	_, err := l.Append(ctx, 0, []byte("x"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, ErrUnavailable)
	_, _, err = l.Watermarks(ctx, 0)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, ErrUnavailable)
}

// appendUntilAccepted appends value as an engine would after an outage or
// a replacement: again while the log answers with the error allowed (for
// ErrUnavailable, the caller's context must not be what ended), until the
// test context ends. It returns the offset and the number of tries.
func appendUntilAccepted(t *testing.T, l *Log, partition int32, value []byte, allowed error) (int64, int) {
	t.Helper()
	ctx := testContext(t)
	for tries := 1; ; tries++ {
		off, err := l.Append(ctx, partition, value)
		if err == nil {
			return off, tries
		}
		if allowed == ErrUnavailable {
			requireUnavailable(t, err, "Append after the fault")
		} else {
			require.ErrorIs(t, err, allowed)
		}
	}
}
