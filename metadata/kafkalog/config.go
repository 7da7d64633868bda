package kafkalog

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/activetier/activetier/metadata"
)

// Defaults applied by New to the zero values of Config.
const (
	// DefaultTopic is the topic KIP-1176 names for WAL metadata.
	DefaultTopic = "__remote_wal_log_metadata"
	// DefaultPartitions is KIP-1176's partition count for DefaultTopic. It
	// is also the most brokers that can each read a metadata partition of
	// their own; see the package documentation for sizing.
	DefaultPartitions int32 = 50
	// DefaultRetention is the retention.ms a created topic gets. Explicit
	// trimming by the engines is the normal way records go; retention is
	// the backstop. See the package documentation for the reasoning.
	DefaultRetention = time.Hour
	// DefaultSegmentRoll is the segment.ms a created topic gets. Kafka
	// only deletes closed segments, so retention cannot act sooner than a
	// segment rolls; Kafka's default of seven days would make a one-hour
	// retention meaningless on a quiet partition.
	DefaultSegmentRoll = 10 * time.Minute
	// DefaultReadWait bounds how long Read long-polls for records before
	// returning an empty result. It matches Kafka's fetch.max.wait.ms.
	DefaultReadWait = 500 * time.Millisecond
	// DefaultReadMaxBytes bounds one fetch: the bytes a Read asks the
	// broker for, and so what one partition's read-ahead can hold.
	DefaultReadMaxBytes int32 = 1 << 20
	// DefaultDeliveryTimeout bounds how long Append waits for Kafka to
	// acknowledge a record. A healthy cluster acknowledges in
	// milliseconds and a leader election takes well under a second, so
	// five seconds rides out both while still telling the caller of an
	// outage long before a flush interval's worth of entries piles up.
	DefaultDeliveryTimeout = 5 * time.Second
	// DefaultRequestTimeout bounds Watermarks and Trim, and each Read
	// beyond its long poll (Config.ReadWait), for the same reasons.
	DefaultRequestTimeout = 5 * time.Second
)

// minTimeout is the shortest DeliveryTimeout or RequestTimeout New accepts:
// the shortest request timeout franz-go accepts, which the log derives
// from them.
const minTimeout = 100 * time.Millisecond

// Config configures a Kafka-backed metadata log. The zero value of every
// field but the brokers selects its default.
type Config struct {
	// SeedBrokers are the "host:port" addresses the clients bootstrap
	// from. Required unless ClientOpts supplies kgo.SeedBrokers.
	SeedBrokers []string

	// ClientOpts are passed to every franz-go client the log creates,
	// after the log's own defaults, so they can add TLS, SASL, client IDs,
	// dialers or override producer tuning such as linger or compression.
	// The log rejects options that would weaken its guarantees: acks other
	// than all in-sync replicas, disabled idempotence, a transactional ID,
	// topic auto-creation. The log always partitions records itself
	// (kgo.ManualPartitioner).
	ClientOpts []kgo.Opt

	// Topic is the metadata topic. Default DefaultTopic.
	Topic string

	// Partitions is the number of partitions the topic must have: the
	// count the follower-affinity partitioner was configured with.
	// New fails with a *PartitionCountError if the topic disagrees.
	// Default DefaultPartitions.
	Partitions int32

	// ReplicationFactor is used when New creates the topic. Zero lets the
	// brokers choose (default.replication.factor); production clusters
	// should use 3 with min.insync.replicas=2 in TopicConfigs, as for
	// KIP-405's metadata topic.
	ReplicationFactor int16

	// CreateTopic allows New to create the topic when it does not exist.
	// When false, a missing topic is an error wrapping ErrTopicNotFound.
	CreateTopic bool

	// TopicConfigs are merged over DefaultTopicConfigs when New creates the
	// topic. A cleanup.policy other than "delete" is rejected: metadata
	// records have no keys and must not be compacted.
	TopicConfigs map[string]string

	// ReadWait bounds how long one Read long-polls the broker when no
	// record is available. Default DefaultReadWait.
	ReadWait time.Duration

	// ReadMaxBytes bounds the bytes one fetch asks for. Kafka still
	// returns a whole record batch that is larger. Default
	// DefaultReadMaxBytes.
	ReadMaxBytes int32

	// DeliveryTimeout bounds every Append: if Kafka has not acknowledged
	// the record by then, because the cluster rejects it with a retriable
	// error (NOT_ENOUGH_REPLICAS, a leader election) or cannot be reached,
	// Append returns an error wrapping ErrUnavailable. franz-go alone
	// would retry such a record forever. Default DefaultDeliveryTimeout.
	DeliveryTimeout time.Duration

	// RequestTimeout bounds every Watermarks and Trim, and every Read
	// beyond Config.ReadWait; on expiry they return an error wrapping
	// ErrUnavailable. Default DefaultRequestTimeout.
	RequestTimeout time.Duration

	// Logger receives the log's and franz-go's messages. Default
	// slog.Default().
	Logger *slog.Logger
}

// DefaultTopicConfigs returns the topic configs New uses when it creates the
// topic, before Config.TopicConfigs are merged over them. The map is the
// caller's to keep.
func DefaultTopicConfigs() map[string]string {
	return map[string]string{
		"cleanup.policy": "delete",
		"retention.ms":   strconv.FormatInt(DefaultRetention.Milliseconds(), 10),
		"segment.ms":     strconv.FormatInt(DefaultSegmentRoll.Milliseconds(), 10),
	}
}

// withDefaults returns c with its zero values replaced by defaults, or an
// error naming the first invalid field.
func (c Config) withDefaults() (Config, error) {
	if len(c.SeedBrokers) == 0 && len(c.ClientOpts) == 0 {
		return c, configErr("SeedBrokers", "is empty and ClientOpts supplies no brokers")
	}
	for i, b := range c.SeedBrokers {
		if strings.TrimSpace(b) == "" {
			return c, configErr(fmt.Sprintf("SeedBrokers[%d]", i), "is empty")
		}
	}
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if err := metadata.ValidateTopicName(c.Topic); err != nil {
		// Checked here, so that a typo is reported by name rather than
		// as INVALID_TOPIC_EXCEPTION later.
		return c, fmt.Errorf("%w: Config.Topic: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.Partitions == 0:
		c.Partitions = DefaultPartitions
	case c.Partitions < 0:
		return c, configErr("Partitions", fmt.Sprintf("is %d, must be positive", c.Partitions))
	}
	if c.ReplicationFactor < 0 {
		return c, configErr("ReplicationFactor", fmt.Sprintf("is %d, must be positive (or zero for the brokers' default)", c.ReplicationFactor))
	}
	topicConfigs := DefaultTopicConfigs()
	maps.Copy(topicConfigs, c.TopicConfigs)
	if p := topicConfigs["cleanup.policy"]; p != "delete" {
		return c, configErr(`TopicConfigs["cleanup.policy"]`, fmt.Sprintf("is %q, must be \"delete\": metadata records have no keys to compact by", p))
	}
	c.TopicConfigs = topicConfigs
	switch {
	case c.ReadWait == 0:
		c.ReadWait = DefaultReadWait
	case c.ReadWait < time.Millisecond:
		return c, configErr("ReadWait", fmt.Sprintf("is %v, must be at least 1ms", c.ReadWait))
	}
	switch {
	case c.ReadMaxBytes == 0:
		c.ReadMaxBytes = DefaultReadMaxBytes
	case c.ReadMaxBytes < 0:
		return c, configErr("ReadMaxBytes", fmt.Sprintf("is %d, must be positive", c.ReadMaxBytes))
	}
	for _, d := range []struct {
		field string
		v     *time.Duration
		def   time.Duration
	}{
		{"DeliveryTimeout", &c.DeliveryTimeout, DefaultDeliveryTimeout},
		{"RequestTimeout", &c.RequestTimeout, DefaultRequestTimeout},
	} {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < minTimeout:
			return c, configErr(d.field, fmt.Sprintf("is %v, must be at least %v", *d.v, minTimeout))
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// maxRetryBackoff caps franz-go's backoff between retries (5s by
// default), so that the log resumes within about a second of Kafka
// recovering rather than after a backoff grown during the outage.
const maxRetryBackoff = time.Second

// metadataMinAge is the least time between two of a client's metadata
// requests. The log's clients are few (one writer and one reader per
// broker, as designed), so the brokers can afford it.
const metadataMinAge = 250 * time.Millisecond

// retryBackoff is franz-go's exponential backoff with jitter, from 100ms,
// capped at maxRetryBackoff.
func retryBackoff(fails int) time.Duration {
	d := min(100*time.Millisecond<<min(max(fails-1, 0), 10), maxRetryBackoff)
	return d - time.Duration(rand.Int64N(int64(d/5)))
}

// clientOpts returns the options of every client the log creates: the log's
// defaults, then the caller's, then the partitioner, which the log's record
// routing depends on.
func (c Config) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.WithLogger(slogAdapter{c.Logger}),
		// Each Append waits for its own record, so lingering only adds
		// latency; records that arrive while a request is in flight are
		// still batched.
		kgo.ProducerLinger(0),
		// A produce no Append waits for any more is of no use: the
		// broker may spend DeliveryTimeout on it. A connection whose
		// answer is overdue by RequestTimeout is dropped and the request
		// retried on a new one (franz-go's 10s otherwise), which is how
		// the log gets past a connection that went silent.
		kgo.ProduceRequestTimeout(c.DeliveryTimeout),
		kgo.RequestTimeoutOverhead(c.RequestTimeout),
		kgo.RetryBackoffFn(retryBackoff),
		// franz-go retries a produce that a broker refused with a
		// retriable error only after fresh metadata, which it asks for
		// at most every MetadataMinAge (5s by default): after an outage
		// the log would stay down that long after Kafka came back.
		kgo.MetadataMinAge(metadataMinAge),
	}
	if len(c.SeedBrokers) > 0 {
		opts = append(opts, kgo.SeedBrokers(c.SeedBrokers...))
	}
	opts = append(opts, c.ClientOpts...)
	return append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// checkClient rejects client options that weaken the log's guarantees. It
// reads the options back from a built client, so it sees kgo's defaults and
// the caller's overrides alike.
func checkClient(cl *kgo.Client) error {
	if acks, _ := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); acks != kgo.AllISRAcks() {
		return configErr("ClientOpts", "set kgo.RequiredAcks to other than kgo.AllISRAcks(): an acknowledged entry must survive the loss of the partition leader")
	}
	if disabled, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); disabled {
		return configErr("ClientOpts", "include kgo.DisableIdempotentWrite: a retried produce could store an entry twice")
	}
	if auto, _ := cl.OptValue(kgo.AllowAutoTopicCreation).(bool); auto {
		return configErr("ClientOpts", "include kgo.AllowAutoTopicCreation: a deleted metadata topic would come back with the brokers' default partition count")
	}
	if vs := cl.OptValues(kgo.TransactionalID); len(vs) == 2 && vs[1] == true {
		return configErr("ClientOpts", "set kgo.TransactionalID: the log does not use transactions, and open ones would hold back readers")
	}
	return nil
}

// slogAdapter routes franz-go's log lines to a *slog.Logger.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case a.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelDebug
	case a.l.Enabled(ctx, slog.LevelInfo):
		return kgo.LogLevelInfo
	case a.l.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	case a.l.Enabled(ctx, slog.LevelError):
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}

func (a slogAdapter) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var l slog.Level
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelWarn:
		l = slog.LevelWarn
	case kgo.LogLevelInfo:
		l = slog.LevelInfo
	case kgo.LogLevelDebug:
		l = slog.LevelDebug
	default:
		return
	}
	a.l.Log(context.Background(), l, msg, keyvals...)
}
