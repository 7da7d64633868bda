package kafkalog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func topicACL(op kmsg.ACLOperation) kfake.ACL {
	return kfake.ACL{
		Resource:  kmsg.ACLResourceTypeTopic,
		Name:      testTopic,
		Pattern:   kmsg.ACLResourcePatternTypeLiteral,
		Operation: op,
		Allow:     true,
	}
}

func asUser(user string) []kgo.Opt {
	return []kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: user}.AsMechanism())}
}

// TestAuthorization runs the log as principals with a few of the ACLs it
// needs, on a cluster that checks them.
func TestAuthorization(t *testing.T) {
	c := newCluster(t,
		kfake.EnableSASL(),
		kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.User("PLAIN", "nobody", "nobody"),
		kfake.User("PLAIN", "describer", "describer", topicACL(kmsg.ACLOperationDescribe)),
		kfake.User("PLAIN", "broker", "broker",
			topicACL(kmsg.ACLOperationDescribe),
			topicACL(kmsg.ACLOperationWrite),
			topicACL(kmsg.ACLOperationRead),
			topicACL(kmsg.ACLOperationDelete),
			topicACL(kmsg.ACLOperationDescribeConfigs),
		),
	)
	newAs := func(user string, cfg Config) (*Log, error) {
		cfg.SeedBrokers = c.ListenAddrs()
		cfg.Topic = testTopic
		cfg.ClientOpts = asUser(user)
		cfg.Logger = quietLogger()
		return New(testContext(t), cfg)
	}

	t.Run("CreateWithoutCreateACL", func(t *testing.T) {
		_, err := newAs("broker", Config{Partitions: 2, CreateTopic: true})
		require.ErrorIs(t, err, ErrNotAuthorized)
		assert.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
		assert.Contains(t, err.Error(), "creating topic")
	})

	admin, err := newAs("admin", Config{Partitions: 2, CreateTopic: true})
	require.NoError(t, err, "the superuser creates the topic")
	defer admin.Close()
	ctx := testContext(t)
	_, err = admin.Append(ctx, 0, []byte("by admin"))
	require.NoError(t, err)

	t.Run("NoDescribe", func(t *testing.T) {
		_, err := newAs("nobody", Config{Partitions: 2})
		require.ErrorIs(t, err, ErrNotAuthorized)
		assert.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
		assert.Contains(t, err.Error(), testTopic)
	})

	t.Run("DescribeOnly", func(t *testing.T) {
		l, err := newAs("describer", Config{Partitions: 2})
		require.NoError(t, err, "describing is enough to open the log")
		defer l.Close()

		_, high, err := l.Watermarks(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, int64(1), high)

		_, err = l.Append(ctx, 0, []byte("x"))
		require.ErrorIs(t, err, ErrNotAuthorized, "Append")
		assert.ErrorIs(t, err, kerr.ClusterAuthorizationFailed, "idempotent writes need Write on a topic or IdempotentWrite")

		_, err = l.Read(ctx, 0, 0, 10)
		require.ErrorIs(t, err, ErrNotAuthorized, "Read")
		assert.ErrorIs(t, err, kerr.TopicAuthorizationFailed)

		err = l.Trim(ctx, 0, 1)
		require.ErrorIs(t, err, ErrNotAuthorized, "Trim")
		assert.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
	})

	t.Run("BrokerACLs", func(t *testing.T) {
		l, err := newAs("broker", Config{Partitions: 2})
		require.NoError(t, err)
		defer l.Close()
		off, err := l.Append(ctx, 0, []byte("by broker"))
		require.NoError(t, err)
		assert.Equal(t, int64(1), off)
		recs := readAll(t, l, 0, 0, 2, 10)
		assert.Equal(t, [][]byte{[]byte("by admin"), []byte("by broker")}, valuesOf(recs))
		require.NoError(t, l.Trim(ctx, 0, 1))
	})
}
