package kafkalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/metadata"
)

// topicReadyTimeout bounds how long New waits for a topic it created to get
// partition leaders when ctx has no deadline of its own.
const topicReadyTimeout = 30 * time.Second

// Log is a metadata.Log stored in a Kafka topic. It is safe for concurrent
// use. Appends and administrative calls share one franz-go client; each
// partition that is read gets a client of its own (see Read).
type Log struct {
	cfg   Config
	cl    *kgo.Client
	adm   *kadm.Client
	seeds []string
	// decompressor is shared by the readers; franz-go's is safe for
	// concurrent use and pools its decoders.
	decompressor kgo.Decompressor

	// deliveryTimeout and requestTimeout are the causes of the contexts
	// that bound calls, naming the Config field that set the bound.
	deliveryTimeout, requestTimeout error

	closed atomic.Bool
	mu     sync.Mutex // guards readers and the transition to closed
	// readers holds the partitions read so far, created on first Read.
	readers map[int32]*reader

	// topicMu guards topicID and retiredIDs, and is held for writing
	// while the log switches to a replaced topic, so that an Append
	// reads gen either before the switch or after the producer forgot
	// the old topic.
	topicMu sync.RWMutex
	// topicID is the ID of the topic the log works with; zero on a
	// cluster without topic IDs.
	topicID [16]byte
	// retiredIDs are the IDs of the topic's replaced incarnations, so
	// that metadata from a broker that has not caught up is not taken for
	// another replacement. Replacements are rare operator actions; the
	// list is capped all the same.
	retiredIDs [][16]byte
	// gen counts the replacements the log has seen. Readers compare it
	// with theirs to drop what they hold of an older incarnation.
	gen atomic.Uint64
}

var _ metadata.Log = (*Log)(nil)

// New connects to the brokers, makes sure the metadata topic exists with
// cfg.Partitions partitions (creating it if cfg.CreateTopic allows), and
// returns the log. ctx bounds the setup only.
//
// New fails with an error wrapping ErrInvalidConfig for a bad cfg,
// ErrTopicNotFound for a missing topic it may not create, a
// *PartitionCountError for a partition count that disagrees,
// ErrTopicConfig for a compacted topic, and ErrNotAuthorized (with the
// broker's kerr error) when an ACL is missing. An unreachable cluster gives
// the dial error and the seed brokers tried.
func New(ctx context.Context, cfg Config) (*Log, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(cfg.clientOpts()...)
	if err != nil {
		return nil, fmt.Errorf("%w: Config.SeedBrokers or Config.ClientOpts: %w", ErrInvalidConfig, err)
	}
	if err := checkClient(cl); err != nil {
		cl.Close()
		return nil, err
	}
	seeds, _ := cl.OptValue(kgo.SeedBrokers).([]string)
	l := &Log{
		cfg:             cfg,
		cl:              cl,
		adm:             kadm.NewClient(cl),
		seeds:           seeds,
		decompressor:    kgo.DefaultDecompressor(),
		deliveryTimeout: fmt.Errorf("Kafka did not acknowledge the record within %v (Config.DeliveryTimeout)", cfg.DeliveryTimeout),
		requestTimeout:  fmt.Errorf("Kafka did not answer within %v (Config.RequestTimeout)", cfg.RequestTimeout),
		readers:         make(map[int32]*reader),
	}
	if err := l.ensureTopic(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	return l, nil
}

// ensureTopic creates the topic if it is missing and allowed to, then checks
// its partition count and cleanup policy.
func (l *Log) ensureTopic(ctx context.Context) error {
	topic := l.cfg.Topic
	info, err := topicMetadata(ctx, l.cl, topic)
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition) && l.cfg.CreateTopic:
		if info, err = l.createTopic(ctx); err != nil {
			return err
		}
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("kafkalog: topic %q does not exist and Config.CreateTopic is false: %w: %w", topic, ErrTopicNotFound, err)
	case err != nil:
		return classify(err, fmt.Sprintf("describing topic %q (seed brokers %v)", topic, l.seeds))
	}
	if got := int32(len(info.leaders)); got != l.cfg.Partitions {
		return &PartitionCountError{Topic: topic, Configured: l.cfg.Partitions, Actual: got}
	}
	l.topicID = info.id
	return l.checkTopicConfigs(ctx)
}

func (l *Log) createTopic(ctx context.Context) (topicInfo, error) {
	topic := l.cfg.Topic
	rf := l.cfg.ReplicationFactor
	if rf == 0 {
		rf = -1 // the brokers' default.replication.factor (KIP-464)
	}
	configs := make(map[string]*string, len(l.cfg.TopicConfigs))
	for k, v := range l.cfg.TopicConfigs {
		configs[k] = kadm.StringPtr(v)
	}
	resp, err := l.adm.CreateTopic(ctx, l.cfg.Partitions, rf, configs, topic)
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		// Another broker created it first; its partition count is
		// checked like any existing topic's.
		l.cfg.Logger.Debug("kafkalog: metadata topic created concurrently", "topic", topic)
	case err != nil:
		what := fmt.Sprintf("creating topic %q with %d partitions", topic, l.cfg.Partitions)
		if resp.ErrMessage != "" {
			what += " (" + resp.ErrMessage + ")"
		}
		return topicInfo{}, classify(err, what)
	default:
		l.cfg.Logger.Info("kafkalog: created metadata topic", "topic", topic,
			"partitions", l.cfg.Partitions, "replication_factor", resp.ReplicationFactor)
	}

	// A created topic shows in metadata, with leaders, a moment later.
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, topicReadyTimeout)
		defer cancel()
	}
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		info, err := topicMetadata(ctx, l.cl, topic)
		switch {
		case err == nil && !slices.Contains(info.leaders, -1):
			return info, nil
		case err == nil:
			err = errors.New("some partitions have no leader")
		case !isRetriable(err):
			return topicInfo{}, classify(err, fmt.Sprintf("describing topic %q after creating it", topic))
		}
		if serr := sleep(ctx, wait); serr != nil {
			return topicInfo{}, fmt.Errorf("kafkalog: topic %q created but not ready (last: %v): %w", topic, err, serr)
		}
	}
}

// checkTopicConfigs refuses a compacted topic and warns about unbounded
// retention. Lacking the DescribeConfigs ACL only skips the check, with a
// warning: the log works without it.
func (l *Log) checkTopicConfigs(ctx context.Context) error {
	topic := l.cfg.Topic
	rcs, err := l.adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		err = errors.New("no configs in the response")
		for _, rc := range rcs {
			if rc.Name == topic {
				err = rc.Err
			}
		}
	}
	if isAuthorization(err) {
		l.cfg.Logger.Warn("kafkalog: cannot check the metadata topic's configs", "topic", topic, "err", err)
		return nil
	}
	if err != nil {
		return classify(err, fmt.Sprintf("describing configs of topic %q", topic))
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Value == nil {
				continue
			}
			switch c.Key {
			case "cleanup.policy":
				if strings.Contains(*c.Value, "compact") {
					return fmt.Errorf("%w: topic %q has cleanup.policy=%s; metadata records have no keys and need cleanup.policy=delete", ErrTopicConfig, topic, *c.Value)
				}
			case "retention.ms":
				if *c.Value == "-1" {
					l.cfg.Logger.Warn("kafkalog: metadata topic keeps records forever; WAL metadata grows with every flush of every partition",
						"topic", topic, "retention.ms", *c.Value, "suggested", DefaultRetention.Milliseconds())
				}
			}
		}
	}
	return nil
}

// Partitions returns Config.Partitions, which New checked against the topic.
func (l *Log) Partitions() int32 { return l.cfg.Partitions }

// check is the entry test of every operation.
func (l *Log) check(ctx context.Context, partition int32, op string) error {
	if l.closed.Load() {
		return fmt.Errorf("kafkalog: %s partition %d: %w", op, partition, metadata.ErrClosed)
	}
	if partition < 0 || partition >= l.cfg.Partitions {
		return fmt.Errorf("kafkalog: %s partition %d of topic %q (%d partitions): %w", op, partition, l.cfg.Topic, l.cfg.Partitions, metadata.ErrUnknownPartition)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafkalog: %s partition %d: %w", op, partition, err)
	}
	return nil
}

// bound returns the context of one call: the caller's ctx, ended by the
// call's timeout as well. Its Cause names the Config field.
func bound(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, cause)
}

// opErr maps an error of a call to ErrClosed if the log was closed
// meanwhile, keeps the caller's context error if ctx ended, maps the end of
// opCtx (ctx bounded by the call's timeout) to ErrUnavailable, and
// classifies the rest.
func (l *Log) opErr(ctx, opCtx context.Context, err error, what string) error {
	if l.closed.Load() {
		return fmt.Errorf("kafkalog: %s: %w", what, metadata.ErrClosed)
	}
	if ended(ctx) {
		ctxErr := ctx.Err()
		if ctxErr == nil {
			ctxErr = context.DeadlineExceeded
		}
		if err == nil || errors.Is(err, ctxErr) {
			return fmt.Errorf("kafkalog: %s: %w", what, ctxErr)
		}
		return fmt.Errorf("kafkalog: %s: %w (after: %v)", what, ctxErr, err)
	}
	if ended(opCtx) {
		// The call's own timeout, not the caller's: Kafka is the one
		// that failed, and the caller's context is not what ended.
		cause := context.Cause(opCtx)
		if cause == nil {
			cause = errors.New("the call's time ran out")
		}
		if err == nil || isContextErr(err) || errors.Is(err, cause) {
			return fmt.Errorf("kafkalog: %s: %w: %v", what, ErrUnavailable, cause)
		}
		return fmt.Errorf("kafkalog: %s: %w: %v (last error: %w)", what, ErrUnavailable, cause, err)
	}
	if isContextErr(err) {
		// Neither of this call's contexts ended. For an Append,
		// franz-go failed the record with another one of its
		// partition whose context did: it fails a partition's
		// buffered records together.
		return fmt.Errorf("kafkalog: %s: %w: a request was given up before this call's time ran out (%v)", what, ErrUnavailable, err)
	}
	return classify(err, what)
}

// ended reports whether ctx is done or its deadline has passed: a network
// deadline taken from ctx can fire a moment before ctx.Err() is set.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

type produced struct {
	offset int64
	err    error
}

// Append produces value to partition with acks from all in-sync replicas
// and idempotence (franz-go's defaults, which New enforces), and returns the
// offset the broker assigned. value is copied, so the caller may reuse it.
//
// Append returns when the broker acknowledged the record, when
// Config.DeliveryTimeout passes (an error wrapping ErrUnavailable), or when
// ctx ends (an error wrapping ctx's), whichever is first. franz-go retries
// transient failures (leader changes, NOT_ENOUGH_REPLICAS, dropped
// connections) meanwhile. After a timeout the record may still be stored,
// as with any write whose answer was not received: franz-go drops it as
// soon as that is safe, but not while its request may have reached the
// broker unanswered. Records of a partition are failed together, so an
// Append can also fail with ErrUnavailable because one before it in the
// same partition timed out while its request was unanswered. The log
// recovers by itself when Kafka does.
// A topic deleted and re-created under the log gives ErrTopicReplaced, and
// the next Append goes to the new topic.
func (l *Log) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	if err := l.check(ctx, partition, "append to"); err != nil {
		return -1, err
	}
	l.topicMu.RLock()
	gen := l.gen.Load()
	l.topicMu.RUnlock()
	opCtx, cancel := bound(ctx, l.cfg.DeliveryTimeout, l.deliveryTimeout)
	defer cancel()
	value = bytes.Clone(value)
	var p produced
	for attempt := 1; ; attempt++ {
		p = l.produce(opCtx, partition, value)
		// A record failed with another one whose Append was given up
		// was never stored (franz-go fails records only when that is
		// certain), so it is produced again while there is time.
		if p.err == nil || !isContextErr(p.err) || opCtx.Err() != nil || attempt == retryAttempts {
			break
		}
	}
	if p.err == nil {
		return p.offset, nil
	}
	what := fmt.Sprintf("append to partition %d of topic %q", partition, l.cfg.Topic)
	if isTopicGone(p.err) || l.gen.Load() != gen {
		if err := l.checkReplaced(opCtx, gen, what); err != nil {
			return -1, err
		}
	}
	err := l.opErr(ctx, opCtx, p.err, what)
	if errors.Is(err, ErrUnavailable) || isContextErr(err) {
		return -1, fmt.Errorf("%w (the record may still be stored)", err)
	}
	if !errors.Is(err, metadata.ErrClosed) && !errors.Is(err, ErrNotAuthorized) {
		if pce := l.checkPartitionCount(opCtx, partition); pce != nil {
			return -1, fmt.Errorf("kafkalog: %s: %w (%v)", what, pce, p.err)
		}
	}
	return -1, err
}

// checkPartitionCount asks, after a produce failed otherwise than for
// time or access, whether the topic still has partition: franz-go fails
// a record for a partition the topic lacks (one re-created with fewer
// partitions) with an error of no type, which only the topic's metadata
// explains. It returns a *PartitionCountError if the partition is
// missing, nil if it is there or the cluster cannot tell now.
func (l *Log) checkPartitionCount(ctx context.Context, partition int32) error {
	info, err := topicMetadata(ctx, l.cl, l.cfg.Topic)
	if err != nil || partition < int32(len(info.leaders)) {
		return nil
	}
	return &PartitionCountError{Topic: l.cfg.Topic, Configured: l.cfg.Partitions, Actual: int32(len(info.leaders))}
}

// produce produces one record and waits for its outcome until opCtx ends.
func (l *Log) produce(opCtx context.Context, partition int32, value []byte) produced {
	rec := &kgo.Record{Topic: l.cfg.Topic, Partition: partition, Value: value}
	done := make(chan produced, 1)
	// opCtx also lets franz-go drop the record, once that is safe, when
	// the Append is given up: a record nobody waits for is not retried
	// forever, and its buffer is freed.
	l.cl.Produce(opCtx, rec, func(r *kgo.Record, err error) { done <- produced{r.Offset, err} })
	select {
	case p := <-done:
		return p
	case <-opCtx.Done():
		return produced{-1, context.Cause(opCtx)}
	}
}

// checkReplaced learns, after an error that a replaced topic causes,
// whether the topic was replaced since generation gen: by asking the
// cluster for the topic's ID, unless another call already found out. It
// returns an error wrapping ErrTopicReplaced if so, nil if not or if the
// cluster cannot tell now.
func (l *Log) checkReplaced(ctx context.Context, gen uint64, what string) error {
	if l.gen.Load() == gen {
		info, err := topicMetadata(ctx, l.cl, l.cfg.Topic)
		if err != nil {
			return nil
		}
		if err := l.noteTopicID(info.id, gen); !errors.Is(err, ErrTopicReplaced) {
			return nil
		}
	}
	return l.replacedErr(what)
}

// errStaleTopicID is a metadata answer that still shows a replaced
// incarnation of the topic: the broker has not caught up yet.
var errStaleTopicID = errors.New("a broker's metadata still shows the replaced topic ID")

// maxRetiredIDs caps Log.retiredIDs.
const maxRetiredIDs = 8

// noteTopicID compares the topic ID of a metadata answer, read while the
// log was at generation gen, with the ID the log works with. A new ID
// means the topic was replaced: the log adopts it, makes the producer
// forget the old topic (franz-go never adopts a new ID by itself and fails
// every record with UNKNOWN_TOPIC_ID until then), and moves to the next
// generation, which makes every reader drop what it holds. It returns an
// error wrapping ErrTopicReplaced when the log is past gen, errStaleTopicID
// for a replaced ID, and nil for the current one or none.
func (l *Log) noteTopicID(id [16]byte, gen uint64) error {
	l.topicMu.Lock()
	defer l.topicMu.Unlock()
	switch {
	case l.gen.Load() != gen:
		return ErrTopicReplaced
	case id == [16]byte{} || id == l.topicID:
		return nil
	case slices.Contains(l.retiredIDs, id):
		return errStaleTopicID
	}
	old := l.topicID
	if len(l.retiredIDs) == maxRetiredIDs {
		l.retiredIDs = slices.Delete(l.retiredIDs, 0, 1)
	}
	l.retiredIDs = append(l.retiredIDs, old)
	l.topicID = id
	// Under topicMu, so that an Append either started before (and its
	// record is failed here, or went to the new topic) or starts after.
	l.cl.PurgeTopicsFromProducing(l.cfg.Topic)
	l.gen.Add(1)
	l.cfg.Logger.Warn("kafkalog: metadata topic was deleted and re-created; offsets restart at zero and entries of the old topic are gone",
		"topic", l.cfg.Topic, "old_id", fmt.Sprintf("%x", old), "new_id", fmt.Sprintf("%x", id))
	return ErrTopicReplaced
}

// replacedErr is the error of a call that found the topic replaced.
func (l *Log) replacedErr(what string) error {
	l.topicMu.RLock()
	id := l.topicID
	l.topicMu.RUnlock()
	return fmt.Errorf("kafkalog: %s: %w: it now has topic ID %x", what, ErrTopicReplaced, id)
}

// Watermarks lists the partition's start and end offsets (ListOffsets with
// the earliest and latest timestamps) in two concurrent requests to the
// partition's leader.
func (l *Log) Watermarks(ctx context.Context, partition int32) (low, high int64, err error) {
	if err := l.check(ctx, partition, "list watermarks of"); err != nil {
		return 0, 0, err
	}
	opCtx, cancel := bound(ctx, l.cfg.RequestTimeout, l.requestTimeout)
	defer cancel()
	low, high, err = l.watermarks(opCtx, partition)
	if err != nil {
		return 0, 0, l.opErr(ctx, opCtx, err, fmt.Sprintf("list watermarks of partition %d of topic %q", partition, l.cfg.Topic))
	}
	return low, high, nil
}

func (l *Log) watermarks(ctx context.Context, partition int32) (low, high int64, err error) {
	var lowErr error
	var wg sync.WaitGroup
	wg.Go(func() { low, lowErr = l.listOffset(ctx, partition, -2) })
	high, err = l.listOffset(ctx, partition, -1)
	wg.Wait()
	if err = errors.Join(lowErr, err); err != nil {
		return 0, 0, err
	}
	// The two answers are from two moments; a trim to the high watermark
	// between them could show low above high, which no single moment has.
	return low, max(low, high), nil
}

// listOffset asks the partition's leader for the offset at timestamp ts:
// -2 for the log start offset, -1 for the high watermark. franz-go routes
// the request to the leader; a leadership change is retried here.
func (l *Log) listOffset(ctx context.Context, partition int32, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = l.cfg.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var offset int64
	err := retry(ctx, func() error {
		resp, err := req.RequestWith(ctx, l.cl)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.Partition == partition {
					offset = p.Offset
					return kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
		return fmt.Errorf("ListOffsets response omitted partition %d", partition)
	})
	return offset, err
}

// Trim deletes the partition's records below before with DeleteRecords,
// which moves the partition's log start offset. Kafka frees the disk space
// when whole segments fall below it.
//
// DeleteRecords names the topic, not its ID, so Trim first checks the
// topic's ID: an offset of a topic that was since deleted and re-created
// would delete records of the new one that nobody has read. Such a Trim
// deletes nothing and returns ErrTopicReplaced.
func (l *Log) Trim(ctx context.Context, partition int32, before int64) error {
	if err := l.check(ctx, partition, "trim"); err != nil {
		return err
	}
	what := fmt.Sprintf("trim partition %d of topic %q before offset %d", partition, l.cfg.Topic, before)
	if before <= 0 {
		// Nothing is stored below offset 0. Kafka would read -1 as
		// "up to the high watermark", which is not what was asked.
		return nil
	}
	opCtx, cancel := bound(ctx, l.cfg.RequestTimeout, l.requestTimeout)
	defer cancel()
	gen := l.gen.Load()
	err := retry(opCtx, func() error {
		info, err := topicMetadata(opCtx, l.cl, l.cfg.Topic)
		if err == nil {
			err = l.noteTopicID(info.id, gen)
		}
		return err
	})
	if errors.Is(err, ErrTopicReplaced) {
		return l.replacedErr(what)
	}
	if err != nil {
		return l.opErr(ctx, opCtx, err, what)
	}
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: l.cfg.Topic, Partition: partition, At: before, LeaderEpoch: -1})
	var resp kadm.DeleteRecordsResponse
	// Moving the log start offset again is harmless, so a dropped
	// connection or a leader change is retried like a read.
	err = retryIf(opCtx, isTransient, func() error {
		resps, err := l.adm.DeleteRecords(opCtx, offsets)
		if err != nil {
			return err
		}
		var ok bool
		if resp, ok = resps.Lookup(l.cfg.Topic, partition); !ok {
			return fmt.Errorf("DeleteRecords response omitted the partition")
		}
		if isTransient(resp.Err) {
			return resp.Err
		}
		return nil
	})
	if err != nil {
		return l.opErr(ctx, opCtx, err, what)
	}
	if errors.Is(resp.Err, kerr.OffsetOutOfRange) {
		// Kafka answers so for an offset past the high watermark; some
		// brokers (kfake among them) also for one below the log start
		// offset, which the Log contract makes a no-op.
		low, high, werr := l.watermarks(opCtx, partition)
		switch {
		case werr != nil:
			return l.opErr(ctx, opCtx, errors.Join(resp.Err, werr), what)
		case before <= low:
			return nil
		}
		return fmt.Errorf("kafkalog: %s: %w: high watermark is %d", what, metadata.ErrOffsetOutOfRange, high)
	}
	if resp.Err != nil {
		return l.opErr(ctx, opCtx, resp.Err, what)
	}
	if r := l.existingReader(partition); r != nil {
		r.trimmed(before)
	}
	return nil
}

// Close closes the franz-go clients, which ends reads waiting for records
// (they return metadata.ErrClosed) and fails appends not yet acknowledged.
// Calls after Close, including Close, return metadata.ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed.Swap(true) {
		l.mu.Unlock()
		return fmt.Errorf("kafkalog: close: %w", metadata.ErrClosed)
	}
	readers := l.readers
	l.readers = nil
	l.mu.Unlock()
	for _, r := range readers {
		r.cl.Close()
	}
	l.cl.Close()
	return nil
}

// topicInfo is what the log needs from a metadata response.
type topicInfo struct {
	id [16]byte
	// leaders holds each partition's leader, -1 if it has none.
	leaders []int32
}

// topicMetadata asks the cluster about one topic. Unlike kadm's cached
// metadata, it always goes to a broker, which is what a refresh after a
// leadership error needs.
func topicMetadata(ctx context.Context, cl *kgo.Client, topic string) (topicInfo, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return topicInfo{}, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return topicInfo{}, err
		}
		info := topicInfo{id: t.TopicID, leaders: make([]int32, len(t.Partitions))}
		for i := range info.leaders {
			info.leaders[i] = -1
		}
		for _, p := range t.Partitions {
			if p.Partition < 0 || int(p.Partition) >= len(info.leaders) {
				return topicInfo{}, fmt.Errorf("metadata of topic %q lists partition %d among %d partitions", topic, p.Partition, len(t.Partitions))
			}
			if kerr.ErrorForCode(p.ErrorCode) == nil {
				info.leaders[p.Partition] = p.Leader
			}
		}
		return info, nil
	}
	return topicInfo{}, fmt.Errorf("metadata response omitted topic %q", topic)
}

// isRetriable reports whether err is a broker error Kafka marks retriable,
// such as a leadership change, or metadata that has not caught up.
func isRetriable(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && ke.Retriable || errors.Is(err, errStaleTopicID)
}

// retryAttempts bounds the attempts of one operation on retriable broker
// errors. franz-go already retries connection failures; these are answers
// such as NOT_LEADER_OR_FOLLOWER that need fresh metadata first.
const retryAttempts = 4

// retry calls fn until it succeeds, fails with a non-retriable error, ctx
// ends, or retryAttempts is reached, backing off between attempts.
func retry(ctx context.Context, fn func() error) error {
	return retryIf(ctx, isRetriable, fn)
}

// retryIf is retry with retriable saying which errors are worth another
// attempt.
func retryIf(ctx context.Context, retriable func(error) bool, fn func() error) error {
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !retriable(err) || attempt == retryAttempts {
			return err
		}
		if serr := sleep(ctx, wait); serr != nil {
			return err
		}
		wait *= 2
	}
}

// sleep waits for d or until ctx ends, returning ctx's error in the latter
// case.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
