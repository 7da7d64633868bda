package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// clusterID is what Metadata reports; clients only compare it.
const clusterID = "activetier-kafkabroker"

func (b *Broker) metadata(req *kmsg.MetadataRequest) kmsg.Response {
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = req.Version
	brokers, topics := b.clusterView()
	b.mu.Lock()
	// A broker that has no view yet (it just started) knows of no topic:
	// UNKNOWN_TOPIC_OR_PARTITION would make clients fail records that a
	// broker with the view would take.
	unknown := kerr.UnknownTopicOrPartition.Code
	if !b.hasView {
		unknown = kerr.LeaderNotAvailable.Code
	}
	b.mu.Unlock()
	ids := make([]int32, 0, len(brokers))
	for id := range brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	resp.ControllerID = -1
	if len(ids) > 0 {
		resp.ControllerID = ids[0]
	}
	resp.ClusterID = new(string)
	*resp.ClusterID = clusterID
	for _, id := range ids {
		bi := brokers[id]
		host, port, err := net.SplitHostPort(bi.Kafka)
		if err != nil {
			continue
		}
		pn, _ := strconv.Atoi(port)
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = id, host, int32(pn)
		rack := bi.AZ
		mb.Rack = &rack
		resp.Brokers = append(resp.Brokers, mb)
	}

	var names []string
	if req.Topics == nil || len(req.Topics) == 0 && req.Version == 0 {
		for t := range topics {
			names = append(names, t)
		}
		slices.Sort(names)
	} else {
		for _, t := range req.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	for _, name := range names {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &name
		n, ok := topics[name]
		if !ok {
			mt.ErrorCode = unknown
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		for i := range n {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = i
			p := b.partition(metadata.TopicPartition{Topic: name, Partition: i})
			if p == nil {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
				mt.Partitions = append(mt.Partitions, mp)
				continue
			}
			s := p.snapshot()
			mp.Leader, mp.LeaderEpoch = s.leader, s.epoch
			mp.Replicas, mp.ISR = s.replicas, s.isr
			mp.OfflineReplicas = []int32{}
			for _, r := range s.replicas {
				if _, live := brokers[r]; !live {
					mp.OfflineReplicas = append(mp.OfflineReplicas, r)
				}
			}
			if _, live := brokers[s.leader]; !live {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

// kafkaCode maps the broker's errors to Kafka's.
func kafkaCode(err error) int16 {
	var bad *errRefused
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &bad):
		return bad.kerr.Code
	case errors.Is(err, errUnknownTP):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, errNotLeader):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, errTimedOut):
		return kerr.RequestTimedOut.Code
	case errors.As(err, &ke):
		return ke.Code
	}
	return kerr.KafkaStorageError.Code
}

// handleProduce appends every partition's batches now, in the order the
// connection sent them, and returns the wait for acks.
func (b *Broker) handleProduce(ctx context.Context, req *kmsg.ProduceRequest) reply {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = req.Version
	type wait struct {
		ti, pi int // the partition's answer in resp
		tp     metadata.TopicPartition
		epoch  int32
		last   int64
	}
	var waits []wait
	refuse := func(code int16) reply {
		mirror(reflect.ValueOf(req).Elem(), reflect.ValueOf(resp).Elem(), code)
		return func(context.Context) kmsg.Response { return resp }
	}
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		// As Kafka: acks=2 taken as acks=1 would tell the client its
		// records are on two replicas when only the leader has them.
		return refuse(kerr.InvalidRequiredAcks.Code)
	case req.TransactionID != nil:
		// No transaction coordinator: every partition is refused.
		return refuse(kerr.TransactionalIDAuthorizationFailed.Code)
	}
	for ti, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for pi, pp := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = pp.Partition
			tp := metadata.TopicPartition{Topic: t.Topic, Partition: pp.Partition}
			pb, err := parseProduced(pp.Records, req.Version)
			var base, last int64
			var epoch int32
			if err == nil {
				base, last, epoch, err = b.produce(ctx, tp, pb)
			}
			rp.ErrorCode = kafkaCode(err)
			if err != nil && rp.ErrorCode == kerr.KafkaStorageError.Code {
				b.lg.Warn("produce failed", "partition", tp.String(), "err", err)
			}
			if bad := (*errRefused)(nil); errors.As(err, &bad) {
				rp.ErrorMessage = &bad.why
			}
			if err == nil {
				rp.BaseOffset = base
				if start, serr := b.log.StartOffset(tp); serr == nil {
					rp.LogStartOffset = start
				}
				if req.Acks == -1 {
					waits = append(waits, wait{ti: ti, pi: pi, tp: tp, epoch: epoch, last: last})
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Acks == 0 {
		return func(context.Context) kmsg.Response { return nil }
	}
	timeout := req.TimeoutMillis
	return func(ctx context.Context) kmsg.Response {
		ctx, cancel := waitOrTimeout(ctx, timeout)
		defer cancel()
		for _, w := range waits {
			if err := b.waitReplicated(ctx, w.tp, w.epoch, w.last); err != nil {
				resp.Topics[w.ti].Partitions[w.pi].ErrorCode = kafkaCode(err)
			}
		}
		return resp
	}
}

// fetch serves a consumer's fetch: from a leader, what lies below the high
// watermark, or, for a client in another rack where a follower is, that
// follower as its preferred read replica (KIP-392); from a follower, what
// lies below the high watermark it has learned. It long-polls until
// MinBytes are there or MaxWaitMillis pass; the wait bounds only the
// long poll, not the reads, so a fetch that does not wait still reads
// what is there.
func (b *Broker) fetch(ctx context.Context, req *kmsg.FetchRequest) kmsg.Response {
	wait, cancel := waitOrTimeout(ctx, req.MaxWaitMillis)
	defer cancel()
	if req.ReplicaID >= 0 {
		// Followers replicate through activetier, never by fetching.
		resp := unsupported(request{key: req.Key(), version: req.Version, kreq: req}).(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp
	}
	for {
		ch := b.changes()
		resp, size := b.fetchOnce(ctx, req)
		if size >= max(int(req.MinBytes), 1) || resp.ErrorCode != 0 || hasPartitionError(resp) {
			return resp
		}
		select {
		case <-ch:
		case <-wait.Done():
			return resp
		}
	}
}

func hasPartitionError(resp *kmsg.FetchResponse) bool {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.PreferredReadReplica >= 0 {
				return true
			}
		}
	}
	return false
}

func (b *Broker) fetchOnce(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, int) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	if req.SessionEpoch > 0 {
		// No fetch sessions (KIP-227) are kept: the client was never
		// given one, so a session epoch of its own is unknown.
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, 0
	}
	budget := int(req.MaxBytes)
	if budget <= 0 {
		budget = 1 << 20
	}
	budget = min(budget, b.cfg.MaxFetchBytes)
	size := 0
	brokers, _ := b.clusterView()
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		for _, fp := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = fp.Partition
			// Empty, not null: librdkafka refuses a null record set.
			rp.RecordBatches = []byte{}
			tp := metadata.TopicPartition{Topic: t.Topic, Partition: fp.Partition}
			n := b.fetchPartition(ctx, req, tp, fp, &rp, brokers, budget-size, size == 0)
			size += n
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, size
}

func (b *Broker) fetchPartition(ctx context.Context, req *kmsg.FetchRequest, tp metadata.TopicPartition, fp kmsg.FetchRequestTopicPartition,
	rp *kmsg.FetchResponseTopicPartition, brokers map[int32]BrokerInfo, budget int, first bool) int {
	p := b.partition(tp)
	if p == nil {
		rp.ErrorCode = kafkaCode(b.unknownTP())
		return 0
	}
	s := p.snapshot()
	if s.role == roleNone {
		rp.ErrorCode = kerr.NotLeaderForPartition.Code
		return 0
	}
	if req.Version >= 9 && fp.CurrentLeaderEpoch >= 0 {
		switch {
		case fp.CurrentLeaderEpoch < s.epoch:
			rp.ErrorCode = kerr.FencedLeaderEpoch.Code
			return 0
		case fp.CurrentLeaderEpoch > s.epoch:
			rp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			return 0
		}
	}
	start, err1 := b.log.StartOffset(tp)
	end, err2 := b.log.EndOffset(tp)
	if err := errors.Join(err1, err2); err != nil {
		rp.ErrorCode = kerr.KafkaStorageError.Code
		return 0
	}
	hw := min(b.highWatermark(tp, s), end)
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hw, hw, start

	if s.role == roleLeader && req.Version >= 11 && req.Rack != "" && req.Rack != b.cfg.AZ {
		// Only an in-sync follower: one that is catching up may not
		// hold what the consumer has already read.
		for _, r := range s.isr {
			if bi, ok := brokers[r]; ok && r != b.cfg.ID && bi.AZ == req.Rack {
				rp.PreferredReadReplica = r
				return 0
			}
		}
	}
	switch {
	case fp.FetchOffset < start || s.role == roleLeader && fp.FetchOffset > end:
		rp.ErrorCode = kerr.OffsetOutOfRange.Code
		return 0
	case fp.FetchOffset >= hw:
		// Nothing visible yet; a follower that has not caught up
		// with the offset a client learned from the leader waits too.
		return 0
	}
	maxBytes := int(fp.PartitionMaxBytes)
	if budget < maxBytes {
		maxBytes = budget
	}
	if maxBytes <= 0 && !first {
		return 0
	}
	batches, err := b.log.Read(ctx, tp, fp.FetchOffset, max(maxBytes, 1))
	if err != nil {
		rp.ErrorCode = kerr.KafkaStorageError.Code
		b.lg.Warn("fetch: reading the log", "partition", tp.String(), "err", err)
		return 0
	}
	n := 0
	for _, bt := range batches {
		if bt.LastOffset >= hw {
			break
		}
		rp.RecordBatches = append(rp.RecordBatches, bt.Data...)
		n += len(bt.Data)
	}
	if s.role == roleLeader {
		b.servedLeader.Add(int64(n))
	} else {
		b.servedFollower.Add(int64(n))
	}
	return n
}

// listOffsets answers ListOffsets, v0 (which Burrow and old sarama send)
// as v1 in its list of offsets: one offset where v1 has one, none where
// v1 finds none (Kafka's v0 listed segment base offsets, which a reader
// of the latest or earliest offset takes the first of).
func (b *Broker) listOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.Version = req.Version
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, lp := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = lp.Partition
			tp := metadata.TopicPartition{Topic: t.Topic, Partition: lp.Partition}
			rp.Offset, rp.Timestamp, rp.LeaderEpoch, rp.ErrorCode = b.listOffset(ctx, req, tp, lp)
			if req.Version == 0 {
				rp.OldStyleOffsets = []int64{}
				if rp.ErrorCode == 0 && rp.Offset >= 0 && lp.MaxNumOffsets > 0 {
					rp.OldStyleOffsets = append(rp.OldStyleOffsets, rp.Offset)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// listOffset answers one partition as Kafka does, below the high
// watermark: -2 the log start, -1 the high watermark, -3 the first record
// with the newest timestamp, and a timestamp the first record at or after
// it in the first batch whose newest timestamp is (Kafka's search, which
// reads the batch's records), or offset and timestamp -1 when there is
// none. Kafka finds the batch with a time index; this scans the log's
// batch headers.
func (b *Broker) listOffset(ctx context.Context, req *kmsg.ListOffsetsRequest, tp metadata.TopicPartition, lp kmsg.ListOffsetsRequestTopicPartition) (offset, ts int64, epoch int32, code int16) {
	p := b.partition(tp)
	if p == nil {
		return -1, -1, -1, kerr.UnknownTopicOrPartition.Code
	}
	s := p.snapshot()
	if s.role != roleLeader {
		return -1, -1, -1, kerr.NotLeaderForPartition.Code
	}
	if req.Version >= 4 && lp.CurrentLeaderEpoch >= 0 && lp.CurrentLeaderEpoch != s.epoch {
		if lp.CurrentLeaderEpoch < s.epoch {
			return -1, -1, -1, kerr.FencedLeaderEpoch.Code
		}
		return -1, -1, -1, kerr.UnknownLeaderEpoch.Code
	}
	start, err := b.log.StartOffset(tp)
	if err != nil {
		return -1, -1, -1, kerr.KafkaStorageError.Code
	}
	entries, _ := b.log.Epochs(tp)
	lin, _ := fencing.NewLineage(entries...)
	epochAt := func(off int64) int32 {
		if lin == nil {
			return -1
		}
		if e, ok := lin.EpochFor(off); ok {
			return e
		}
		if l, ok := lin.Latest(); ok {
			return l.Epoch
		}
		return -1
	}
	hw := b.highWatermark(tp, s)
	switch lp.Timestamp {
	case -2:
		return start, -1, epochAt(start), 0
	case -1:
		return hw, -1, epochAt(hw), 0
	}
	var best *storage.Batch // -3: the first batch with the newest timestamp
	offset, ts, epoch = -1, -1, -1
	err = b.scanBatches(ctx, tp, start, hw, func(bt storage.Batch) (bool, error) {
		if lp.Timestamp == -3 {
			if best == nil || bt.MaxTimestamp > best.MaxTimestamp {
				best = &bt
			}
			return true, nil
		}
		if bt.MaxTimestamp < lp.Timestamp {
			return true, nil
		}
		serr := scanRecords(bt.Data, func(delta, rts int64) bool {
			if rts >= lp.Timestamp {
				offset, ts, epoch = bt.FirstOffset+delta, rts, bt.Epoch
				return false
			}
			return true
		})
		return offset < 0, serr // on, unless found: the header's max may overstate its records
	})
	if err == nil && best != nil {
		offset, ts, epoch = best.FirstOffset, -1, best.Epoch
		err = scanRecords(best.Data, func(delta, rts int64) bool {
			if rts > ts {
				offset, ts = best.FirstOffset+delta, rts
			}
			return true
		})
	}
	if err != nil {
		b.lg.Warn("ListOffsets: reading the log", "partition", tp.String(), "err", err)
		return -1, -1, -1, kerr.KafkaStorageError.Code
	}
	return offset, ts, epoch, 0
}

// scanBatches calls visit with tp's batches from the one holding from, in
// order, those whose last offset is below to, until visit returns false
// or an error.
func (b *Broker) scanBatches(ctx context.Context, tp metadata.TopicPartition, from, to int64, visit func(storage.Batch) (bool, error)) error {
	for off := from; off < to; {
		batches, err := b.log.Read(ctx, tp, off, 1<<20)
		if err != nil || len(batches) == 0 {
			return err
		}
		for _, bt := range batches {
			if bt.LastOffset >= to {
				return nil
			}
			if more, err := visit(bt); err != nil || !more {
				return err
			}
			off = bt.LastOffset + 1
		}
	}
	return nil
}

func (b *Broker) offsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.Version = req.Version
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, op := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = op.Partition
			rp.LeaderEpoch, rp.EndOffset = -1, -1
			tp := metadata.TopicPartition{Topic: t.Topic, Partition: op.Partition}
			p := b.partition(tp)
			switch {
			case p == nil:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.snapshot().role != roleLeader:
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			case op.CurrentLeaderEpoch >= 0 && op.CurrentLeaderEpoch < p.snapshot().epoch:
				rp.ErrorCode = kerr.FencedLeaderEpoch.Code
			case op.CurrentLeaderEpoch > p.snapshot().epoch:
				rp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			default:
				entries, err1 := b.log.Epochs(tp)
				end, err2 := b.log.EndOffset(tp)
				lin, err3 := fencing.NewLineage(entries...)
				if errors.Join(err1, err2, err3) != nil {
					rp.ErrorCode = kerr.KafkaStorageError.Code
					break
				}
				rp.LeaderEpoch, rp.EndOffset = lin.EndOffsetFor(op.LeaderEpoch, end)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// createTopics forwards a CreateTopics request to the controller the
// cluster view names, which decides and creates the topics, and answers
// with its decisions: any broker takes the request, as Kafka's forwarding
// (KIP-590) does. Without a controller every topic gets INVALID_REQUEST;
// when the controller cannot be reached in time, REQUEST_TIMED_OUT.
func (b *Broker) createTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Version = req.Version
	fwd := TopicsRequest{ValidateOnly: req.ValidateOnly}
	for _, t := range req.Topics {
		tr := TopicRequest{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
		for _, a := range t.ReplicaAssignment {
			tr.Assignment = append(tr.Assignment, Assignment{Partition: a.Partition, Replicas: a.Replicas})
		}
		for _, c := range t.Configs {
			tr.Configs = append(tr.Configs, c.Name)
		}
		fwd.Topics = append(fwd.Topics, tr)
	}
	b.mu.Lock()
	controller := b.controller
	b.mu.Unlock()
	var answers []TopicAnswer
	code, err := kerr.InvalidRequest.Code, errors.New("the cluster view names no controller, so topics cannot be created")
	if controller != "" {
		code = kerr.RequestTimedOut.Code
		// The request's timeout bounds the wait; a request that
		// does not wait (0) still needs the controller's answer.
		timeout := req.TimeoutMillis
		if timeout <= 0 {
			timeout = int32(controllerRequestTimeout / time.Millisecond)
		}
		ctx, cancel := waitOrTimeout(ctx, timeout)
		defer cancel()
		var body []byte
		if body, err = json.Marshal(fwd); err == nil {
			err = postJSON(ctx, b.forward, controller, "/v1/topics", body, &answers)
		}
		if err == nil && len(answers) != len(fwd.Topics) {
			err = fmt.Errorf("the controller answered %d topics of %d", len(answers), len(fwd.Topics))
		}
	}
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		if err != nil {
			msg := "forwarding to the controller: " + err.Error()
			rt.ErrorCode, rt.ErrorMessage = code, &msg
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		a := answers[i]
		rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = a.Code, a.Partitions, a.ReplicationFactor
		if a.Message != "" {
			rt.ErrorMessage = &a.Message
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
