package broker

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/metadata"
)

// The tests in this file are a hostile or buggy client's and
// controller's: requests a well-behaved client never sends, over the wire
// or through the exported API, each checking that the broker answers as
// Kafka does and keeps serving everyone else.
// produceAcks sends one batch to broker 0 with the given acks and returns
// the partition's answer.
func produceAcks(t *testing.T, conn net.Conn, corr int32, tp metadata.TopicPartition, acks int16, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = tp.Partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	body := rawRequest(t, conn, corr, req)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	require.NoError(t, resp.ReadFrom(body[1:]))
	return resp.Topics[0].Partitions[0]
}

// TestAdversaryInvalidAcks: acks other than 0, 1 and -1 are refused with
// INVALID_REQUIRED_ACKS, as Kafka does, and nothing is appended: a client
// asking for acks=2 must not be told its records are stored on two
// replicas when the leader acknowledged them alone.
func TestAdversaryInvalidAcks(t *testing.T) {
	c := startCluster(t, "t", 1)
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
	require.NoError(t, err)
	defer conn.Close()
	for i, acks := range []int16{2, 3, -2, 32767} {
		p := produceAcks(t, conn, int32(i), tp, acks, recordBatch(t, []byte("v")))
		require.Equal(t, kerr.InvalidRequiredAcks.Code, p.ErrorCode, "acks=%d", acks)
	}
	end, err := c.logs[0].EndOffset(tp)
	require.NoError(t, err)
	require.Zero(t, end, "a refused batch was appended")
	// And the connection still serves good requests.
	require.Zero(t, produceAcks(t, conn, 9, tp, 1, recordBatch(t, []byte("v"))).ErrorCode)
}

// TestAdversaryLargeSizePrefix: a client that announces a request of
// nearly the largest size the broker takes and then sends nothing holds
// only the bytes it sent, not the size it announced: ten of them must
// not cost the broker a gigabyte.
func TestAdversaryLargeSizePrefix(t *testing.T) {
	c := startCluster(t, "t", 1)
	const conns, size = 10, maxRequestBytes - 1
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var open []net.Conn
	defer func() {
		for _, conn := range open {
			conn.Close()
		}
	}()
	for range conns {
		conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
		require.NoError(t, err)
		open = append(open, conn)
		hdr := binary.BigEndian.AppendUint32(nil, size)
		hdr = append(hdr, 0, 18, 0, 0, 0, 0, 0, 1) // an ApiVersions header, and no more
		_, err = conn.Write(hdr)
		require.NoError(t, err)
	}
	// Every broker still answers while those connections hang.
	var resp kmsg.ApiVersionsResponse
	require.NoError(t, resp.ReadFrom(rawRequestOn(t, c, kmsg.NewPtrApiVersionsRequest())))
	require.Zero(t, resp.ErrorCode)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %d MiB for %d connections announcing %d MiB each", grown>>20, conns, size>>20)
	require.Less(t, grown, int64(conns*size/4), "the broker allocated what the connections announced, not what they sent")
	// A large request that does arrive is read whole.
	conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
	require.NoError(t, err)
	defer conn.Close()
	big := recordBatch(t, make([]byte, 3<<20))
	require.Zero(t, produceAcks(t, conn, 1, metadata.TopicPartition{Topic: "t", Partition: 0}, 1, big).ErrorCode)
}

// TestAdversaryViewTooLarge: a CreateTopics that would make the
// controller's view larger than a broker takes (POST /v1/cluster reads at
// most maxControlBody) is refused; committed, every later view, the
// elections after a broker fails included, would be refused by every
// broker.
func TestAdversaryViewTooLarge(t *testing.T) {
	var mu sync.Mutex
	var refused []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v Cluster
		if err := decode(r, &v); err != nil {
			mu.Lock()
			refused = append(refused, err.Error())
			mu.Unlock()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	var view Cluster
	for id := range int32(3) {
		view.Brokers = append(view.Brokers, BrokerInfo{ID: id, AZ: fmt.Sprintf("az%d", id), Kafka: "127.0.0.1:1",
			Control: strings.TrimPrefix(srv.URL, "http://"), Incarnation: fmt.Sprint(id)})
	}
	ctl, err := NewController(view)
	require.NoError(t, err)
	defer ctl.CloseIdleConnections()
	var req TopicsRequest
	for i := range 12 {
		req.Topics = append(req.Topics, TopicRequest{Name: fmt.Sprintf("big-%02d", i), Partitions: maxPartitionsPerTopic, ReplicationFactor: 3})
	}
	answers := ctl.CreateTopics(t.Context(), req)
	created := 0
	for _, a := range answers {
		if a.Code == 0 {
			created++
		}
	}
	body, err := json.Marshal(ctl.View())
	require.NoError(t, err)
	t.Logf("%d of %d topics created; the view is %d bytes", created, len(req.Topics), len(body))
	require.LessOrEqual(t, len(body), maxControlBody, "the controller committed a view no broker takes")
	require.Less(t, created, len(req.Topics), "every topic was created")
	assert.Equal(t, kerr.InvalidPartitions.Code, answers[len(answers)-1].Code, "%s", answers[len(answers)-1].Message)
	// The brokers still take the views after it.
	require.NoError(t, ctl.BrokerFailed(t.Context(), 2))
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, refused)
}
