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

	closed atomic.Bool
	mu     sync.Mutex // guards readers and the transition to closed
	// readers holds the partitions read so far, created on first Read.
	readers map[int32]*reader
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
		cfg:          cfg,
		cl:           cl,
		adm:          kadm.NewClient(cl),
		seeds:        seeds,
		decompressor: kgo.DefaultDecompressor(),
		readers:      make(map[int32]*reader),
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

// opErr maps an error of op to ErrClosed if the log was closed meanwhile,
// keeps the context's error if ctx ended, and classifies the rest.
func (l *Log) opErr(ctx context.Context, err error, what string) error {
	if l.closed.Load() {
		return fmt.Errorf("kafkalog: %s: %w", what, metadata.ErrClosed)
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("kafkalog: %s: %w (after: %v)", what, ctxErr, err)
	}
	return classify(err, what)
}

type produced struct {
	offset int64
	err    error
}

// Append produces value to partition with acks from all in-sync replicas
// and idempotence (franz-go's defaults, which New enforces), and returns the
// offset the broker assigned. value is copied, so the caller may reuse it.
// Append returns when the broker acknowledged the record or ctx ends; in the
// second case the record may still be stored, as with any write whose
// answer was not received. franz-go retries transient failures (leader
// changes, broker restarts) meanwhile.
func (l *Log) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	if err := l.check(ctx, partition, "append to"); err != nil {
		return -1, err
	}
	rec := &kgo.Record{Topic: l.cfg.Topic, Partition: partition, Value: bytes.Clone(value)}
	done := make(chan produced, 1)
	l.cl.Produce(ctx, rec, func(r *kgo.Record, err error) { done <- produced{r.Offset, err} })
	var p produced
	select {
	case p = <-done:
	case <-ctx.Done():
		return -1, fmt.Errorf("kafkalog: append to partition %d: %w (the record may still be stored)", partition, ctx.Err())
	}
	if p.err != nil {
		return -1, l.opErr(ctx, p.err, fmt.Sprintf("append to partition %d of topic %q", partition, l.cfg.Topic))
	}
	return p.offset, nil
}

// Watermarks lists the partition's start and end offsets (ListOffsets with
// the earliest and latest timestamps) in two concurrent requests to the
// partition's leader.
func (l *Log) Watermarks(ctx context.Context, partition int32) (low, high int64, err error) {
	if err := l.check(ctx, partition, "list watermarks of"); err != nil {
		return 0, 0, err
	}
	low, high, err = l.watermarks(ctx, partition)
	if err != nil {
		return 0, 0, l.opErr(ctx, err, fmt.Sprintf("list watermarks of partition %d of topic %q", partition, l.cfg.Topic))
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
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: l.cfg.Topic, Partition: partition, At: before, LeaderEpoch: -1})
	resps, err := l.adm.DeleteRecords(ctx, offsets)
	if err != nil {
		return l.opErr(ctx, err, what)
	}
	resp, ok := resps.Lookup(l.cfg.Topic, partition)
	if !ok {
		return fmt.Errorf("kafkalog: %s: DeleteRecords response omitted the partition", what)
	}
	if errors.Is(resp.Err, kerr.OffsetOutOfRange) {
		// Kafka answers so for an offset past the high watermark; some
		// brokers (kfake among them) also for one below the log start
		// offset, which the Log contract makes a no-op.
		low, high, werr := l.watermarks(ctx, partition)
		switch {
		case werr != nil:
			return l.opErr(ctx, errors.Join(resp.Err, werr), what)
		case before <= low:
			return nil
		}
		return fmt.Errorf("kafkalog: %s: %w: high watermark is %d", what, metadata.ErrOffsetOutOfRange, high)
	}
	if resp.Err != nil {
		return l.opErr(ctx, resp.Err, what)
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
// such as a leadership change.
func isRetriable(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && ke.Retriable
}

// retryAttempts bounds the attempts of one operation on retriable broker
// errors. franz-go already retries connection failures; these are answers
// such as NOT_LEADER_OR_FOLLOWER that need fresh metadata first.
const retryAttempts = 4

// retry calls fn until it succeeds, fails with a non-retriable error, ctx
// ends, or retryAttempts is reached, backing off between attempts.
func retry(ctx context.Context, fn func() error) error {
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !isRetriable(err) || attempt == retryAttempts {
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
