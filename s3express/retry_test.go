package s3express_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
)

// TestRetryQuotaPerBucket checks that a dead AZ does not take the SDK's
// retries away from requests to the other AZs. The standard retryer keeps
// a retry quota (a token bucket) per client; failing requests drain it,
// and a drained quota means no more retries. With one client for every
// bucket, an outage of one bucket would leave a transient error on a
// healthy one unretried; with a client per bucket only the dead bucket's
// requests stop being retried, which also makes them fail sooner.
func TestRetryQuotaPerBucket(t *testing.T) {
	var healthy atomic.Int64
	f := newFakeS3(t)
	f.handler = func(w http.ResponseWriter, r *http.Request) bool {
		switch {
		case strings.HasPrefix(r.URL.Path, "/"+bucketB+"/"):
			// The dead AZ: every attempt fails.
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `<Error><Code>InternalError</Code><Message>down</Message></Error>`)
		case healthy.Add(1) == 1:
			// A healthy AZ's one transient failure.
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<Error><Code>ServiceUnavailable</Code><Message>blip</Message></Error>`)
		default:
			w.Header().Set("Content-Range", "bytes 0-4/5")
			w.WriteHeader(http.StatusPartialContent)
			io.WriteString(w, "hello")
		}
		return true
	}
	cfg := testConfig(f.URL)
	// The SDK's standard retryer with its default quota, without the
	// backoff sleeps.
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = noBackoff{} })
	}
	s, err := s3express.New(cfg, s3express.Options{Buckets: threeBuckets(), LocalAZ: azA, S3Compatible: true})
	require.NoError(t, err)
	t.Cleanup(s.CloseIdleConnections)

	dead := metadata.ObjectRef{AZ: azB, Bucket: bucketB, Key: "object"}
	var lastAttempts int
	for range 40 {
		before := len(f.requests())
		_, err := s.GetRange(t.Context(), dead, 0, 5)
		requireKind(t, err, storage.ErrUnavailable, "GetRange from the dead AZ")
		lastAttempts = len(f.requests()) - before
	}
	assert.Equal(t, 1, lastAttempts, "the dead bucket's quota is drained: no more retries for it")

	got, err := s.GetRange(t.Context(), metadata.ObjectRef{AZ: azC, Bucket: bucketC, Key: "object"}, 0, 5)
	require.NoError(t, err, "a healthy bucket's transient failure is still retried")
	assert.Equal(t, "hello", string(got))
	assert.Equal(t, int64(2), healthy.Load(), "attempts to the healthy bucket")
}
