package kafkalog

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/activetier/activetier/metadata"
)

// Errors returned by this package, to be tested with errors.Is. Errors that
// come from a broker also wrap the broker's *kerr.Error, so
// errors.Is(err, kerr.TopicAuthorizationFailed) works as well. Errors that
// the metadata.Log contract defines (metadata.ErrClosed,
// metadata.ErrOffsetOutOfRange, metadata.ErrUnknownPartition) are used as
// they are.
var (
	// ErrInvalidConfig is wrapped by every error New returns for a Config
	// field; the message names the field.
	ErrInvalidConfig = errors.New("kafkalog: invalid config")
	// ErrTopicNotFound means the metadata topic does not exist and
	// Config.CreateTopic does not allow New to create it, or the topic
	// was deleted while the log was in use.
	ErrTopicNotFound = errors.New("kafkalog: metadata topic not found")
	// ErrPartitionCount means the topic's partition count differs from
	// Config.Partitions. The error is a *PartitionCountError.
	ErrPartitionCount = errors.New("kafkalog: metadata topic has the wrong partition count")
	// ErrTopicConfig means the existing topic is configured in a way the
	// log cannot work with, such as a compacted cleanup policy.
	ErrTopicConfig = errors.New("kafkalog: metadata topic misconfigured")
	// ErrNotAuthorized means a broker refused an operation for lack of an
	// ACL: describing, creating, writing, reading or deleting records of
	// the topic, or idempotent writes on the cluster. The message names
	// the operation, and the broker's error is wrapped too.
	ErrNotAuthorized = errors.New("kafkalog: not authorized")
	// ErrUnavailable means Kafka did not do what was asked in time: the
	// cluster kept answering with a retriable error (NOT_ENOUGH_REPLICAS,
	// a leader election, a storage error), could not be reached, or did
	// not answer within Config.DeliveryTimeout (Append) or
	// Config.RequestTimeout (the other calls). The metadata package
	// defines no such sentinel, so this package does. The log stays
	// usable and the same call may succeed later; nothing needs to be
	// reopened. An Append that failed so may still have stored its record:
	// its request may have reached the broker without the answer coming
	// back, and franz-go keeps such a record until an answer settles it.
	ErrUnavailable = errors.New("kafkalog: Kafka unavailable")
	// ErrTopicReplaced means the metadata topic was deleted and created
	// again under the same name (the cluster reports a new topic ID) since
	// this log last used it. Offsets restarted at zero and everything the
	// old topic held is gone. The call that noticed, and the next Read of
	// every partition read before, return it; the log has by then switched
	// to the new topic, so the call after works against it. A Read's
	// error also wraps metadata.ErrOffsetOutOfRange, so that a reader goes
	// back to the low watermark, as after a trim. Requires a cluster with
	// topic IDs (Kafka 2.8 and later).
	ErrTopicReplaced = errors.New("kafkalog: metadata topic was deleted and re-created")
)

// PartitionCountError reports a metadata topic whose partition count
// disagrees with the count the log (and so the follower-affinity partitioner)
// was configured with. Entries routed by id % Configured would land in the
// wrong partitions or in none, so New refuses to continue. Repartitioning a
// live metadata topic is an operator decision, never automatic.
type PartitionCountError struct {
	Topic      string
	Configured int32
	Actual     int32
}

func (e *PartitionCountError) Error() string {
	return fmt.Sprintf("kafkalog: topic %q has %d partitions, Config.Partitions is %d", e.Topic, e.Actual, e.Configured)
}

// Is makes errors.Is(err, ErrPartitionCount) true.
func (e *PartitionCountError) Is(target error) bool { return target == ErrPartitionCount }

func configErr(field, problem string) error {
	return fmt.Errorf("%w: Config.%s %s", ErrInvalidConfig, field, problem)
}

// isAuthorization reports whether err carries a broker error that means an
// ACL is missing.
func isAuthorization(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke {
	case kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
		kerr.GroupAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed:
		return true
	}
	return false
}

// classify adds this package's and the metadata package's sentinels to an
// error from franz-go, so callers need not know Kafka's error codes. what
// says what the log was doing, for the message.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	switch {
	case isAuthorization(err):
		return fmt.Errorf("kafkalog: %s: %w: %w", what, ErrNotAuthorized, err)
	case errors.Is(err, kgo.ErrClientClosed):
		return fmt.Errorf("kafkalog: %s: %w (%w)", what, metadata.ErrClosed, err)
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return fmt.Errorf("kafkalog: %s: %w: %w", what, ErrTopicNotFound, err)
	case isRetriable(err), isNetwork(err):
		return fmt.Errorf("kafkalog: %s: %w: %w", what, ErrUnavailable, err)
	}
	return fmt.Errorf("kafkalog: %s: %w", what, err)
}

// isNetwork reports whether err means a broker could not be reached or
// dropped the connection: what a retry, or time, may cure.
func isNetwork(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		kgo.IsRetryableBrokerErr(err)
}

// isTransient reports whether err is worth retrying a read for: a broker
// answer Kafka marks retriable, or a network failure, but not the end of
// the caller's context or of the log.
func isTransient(err error) bool {
	return isRetriable(err) || isNetwork(err) && !isContextErr(err) && !errors.Is(err, kgo.ErrClientClosed)
}

// isTopicGone reports whether err is a broker saying it does not know the
// topic, by name or by ID: what a deleted, or replaced, topic looks like.
func isTopicGone(err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) ||
		errors.Is(err, kerr.InconsistentTopicID)
}
