package kafkalog

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dropStage is when, in one request's life, a connectionDropper drops the
// connection that carries it.
type dropStage int

const (
	// dropBeforeRequest: the broker never sees the request.
	dropBeforeRequest dropStage = iota
	// dropWhileWaiting: the broker holds the request (a long poll) and
	// has not answered; the connection goes dropWaitingAfter later.
	dropWhileWaiting
	// dropMidResponse: half of the answer is written, then the
	// connection goes.
	dropMidResponse
)

const dropWaitingAfter = 100 * time.Millisecond

func (s dropStage) String() string {
	return [...]string{"before the request", "while the broker waits", "mid-response"}[s]
}

// connectionDropper sits between kfake's listeners and its connections,
// like a TCP proxy in front of the broker, and drops the connection of the
// next request of one kind at one stage, once. It reads the requests'
// frames (size, api key, version, correlation id) as they pass to the
// broker, and the answers' frames (size, correlation id) as they pass back.
type connectionDropper struct {
	mu    sync.Mutex
	key   int16 // the kind of request to drop; -1 when none is armed
	stage dropStage
	fired int
}

func newConnectionDropper() *connectionDropper { return &connectionDropper{key: -1} }

// option is the kfake option that puts d in front of the cluster's
// brokers.
func (d *connectionDropper) option() kfake.Opt {
	return kfake.ListenFn(func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		return &dropListener{Listener: ln, d: d}, nil
	})
}

// arm makes d drop the connection of the next request of key at stage.
func (d *connectionDropper) arm(key kmsg.Key, stage dropStage) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.key, d.stage = int16(key), stage
}

// drops returns how many connections d dropped.
func (d *connectionDropper) drops() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fired
}

// take reports whether a request of key is the one to drop, and at which
// stage, disarming d if so.
func (d *connectionDropper) take(key int16) (dropStage, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.key < 0 || key != d.key {
		return 0, false
	}
	d.key = -1
	d.fired++
	return d.stage, true
}

type dropListener struct {
	net.Listener
	d *connectionDropper
}

func (l *dropListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &dropConn{Conn: c, d: l.d, failing: map[int32]bool{}}, nil
}

// dropConn is one broker-side connection. The broker reads each request
// frame whole (its size, then its body) and writes each answer in one
// Write, which is all the parsing here needs.
type dropConn struct {
	net.Conn
	d *connectionDropper

	mu      sync.Mutex
	head    []byte // the first bytes of the request frame being read
	left    int    // bytes of that frame still to pass once head is complete
	failing map[int32]bool
}

var errDropped = errors.New("connectionDropper: connection dropped")

func (c *dropConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; i < n; {
		if c.left > 0 {
			k := min(c.left, n-i)
			c.left -= k
			i += k
			continue
		}
		c.head = append(c.head, p[i])
		i++
		if len(c.head) < 12 { // size 4, key 2, version 2, correlation id 4
			continue
		}
		size := int(binary.BigEndian.Uint32(c.head))
		key := int16(binary.BigEndian.Uint16(c.head[4:]))
		corr := int32(binary.BigEndian.Uint32(c.head[8:]))
		c.left, c.head = size-8, c.head[:0]
		stage, drop := c.d.take(key)
		if !drop {
			continue
		}
		switch stage {
		case dropBeforeRequest:
			_ = c.Conn.Close()
			return 0, errDropped
		case dropWhileWaiting:
			time.AfterFunc(dropWaitingAfter, func() { _ = c.Conn.Close() })
		case dropMidResponse:
			c.failing[corr] = true
		}
	}
	return n, err
}

func (c *dropConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	fail := len(p) >= 8 && c.failing[int32(binary.BigEndian.Uint32(p[4:]))]
	c.mu.Unlock()
	if !fail {
		return c.Conn.Write(p)
	}
	n, _ := c.Conn.Write(p[:len(p)/2])
	_ = c.Conn.Close()
	return n, errDropped
}

// TestReadRetriesDroppedConnection drops the connection of a Read's fetch
// once, at each stage of the request, and checks the Read still returns
// its records: a network failure is retried within the call. With records
// read ahead, the fetch dropped is the one that confirms them.
func TestReadRetriesDroppedConnection(t *testing.T) {
	for _, readAhead := range []bool{false, true} {
		for _, stage := range []dropStage{dropBeforeRequest, dropWhileWaiting, dropMidResponse} {
			if readAhead && stage == dropWhileWaiting {
				continue // a confirmation does not wait
			}
			name := stage.String()
			if readAhead {
				name = "read ahead, " + name
			}
			t.Run(name, func(t *testing.T) {
				d := newConnectionDropper()
				c := newCluster(t, kfake.SeedTopics(1, testTopic), d.option())
				l := openLog(t, c, Config{Partitions: 1, ReadWait: time.Second})
				want := appendN(t, l, 0, 3)
				from := int64(0)
				switch {
				case stage == dropWhileWaiting:
					from = 3 // at the end: the broker holds the fetch
				case readAhead:
					recs, err := l.Read(testContext(t), 0, 0, 1)
					require.NoError(t, err)
					require.Len(t, recs, 1)
					from, want = 1, want[1:]
				}
				d.arm(kmsg.Fetch, stage)
				recs, err := l.Read(testContext(t), 0, from, 10)
				require.NoError(t, err, "one dropped connection is retried")
				require.Equal(t, 1, d.drops(), "the connection was dropped")
				if stage == dropWhileWaiting {
					assert.Empty(t, recs)
				} else {
					assert.Equal(t, want, valuesOf(recs))
				}
			})
		}
	}
}

// TestReadWithCancelledContext: a Read with a context already ended sends
// nothing and returns the context's error, not ErrUnavailable, and leaves
// what was read ahead for the next Read.
func TestReadWithCancelledContext(t *testing.T) {
	d := newConnectionDropper()
	c := newCluster(t, kfake.SeedTopics(1, testTopic), d.option())
	l := openLog(t, c, Config{Partitions: 1})
	want := appendN(t, l, 0, 4)
	recs, err := l.Read(testContext(t), 0, 0, 2)
	require.NoError(t, err)
	require.Len(t, recs, 2)

	ctx, cancel := context.WithCancel(testContext(t))
	cancel()
	d.arm(kmsg.Fetch, dropBeforeRequest) // a fetch would fail
	_, err = l.Read(ctx, 0, 2, 2)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrUnavailable)
	assert.Equal(t, 0, d.drops(), "no fetch was sent")

	d.arm(-1, 0)
	recs = readAll(t, l, 0, 2, 2, 2)
	assert.Equal(t, want[2:], valuesOf(recs))
}

// TestOtherCallsRetryDroppedConnection: the calls that go through the
// shared client (Watermarks, Trim, the Read's metadata) survive one
// dropped connection too.
func TestOtherCallsRetryDroppedConnection(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.ListOffsets, kmsg.Metadata, kmsg.DeleteRecords} {
		for _, stage := range []dropStage{dropBeforeRequest, dropMidResponse} {
			t.Run(key.Name()+" "+stage.String(), func(t *testing.T) {
				d := newConnectionDropper()
				c := newCluster(t, kfake.SeedTopics(1, testTopic), d.option())
				l := openLog(t, c, Config{Partitions: 1})
				appendN(t, l, 0, 3)
				ctx := testContext(t)
				d.arm(key, stage)
				switch key {
				case kmsg.ListOffsets:
					low, high, err := l.Watermarks(ctx, 0)
					require.NoError(t, err)
					assert.Equal(t, [2]int64{0, 3}, [2]int64{low, high})
				case kmsg.Metadata:
					recs, err := l.Read(ctx, 0, 0, 10)
					require.NoError(t, err)
					assert.Len(t, recs, 3)
				case kmsg.DeleteRecords:
					require.NoError(t, l.Trim(ctx, 0, 1))
				}
				require.Equal(t, 1, d.drops())
			})
		}
	}
}
