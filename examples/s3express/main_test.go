package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/activetier/activetier/s3express"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const threeBuckets = "use1-az4=wal--use1-az4--x-s3,use1-az5=wal--use1-az5--x-s3,use1-az6=wal--use1-az6--x-s3"

func TestParseFlags(t *testing.T) {
	for _, c := range []struct {
		name, env string
		args      []string
		wantErr   string
	}{
		{name: "from the flag", args: []string{"-buckets", threeBuckets}},
		{name: "from the environment", env: threeBuckets},
		{name: "flag over environment", env: "a=b", args: []string{"-buckets", threeBuckets}},
		{name: "missing", wantErr: "-buckets: missing"},
		{name: "two AZs", args: []string{"-buckets", "use1-az4=a--use1-az4--x-s3,use1-az5=a--use1-az5--x-s3"}, wantErr: "2 AZs listed"},
		{name: "not a pair", args: []string{"-buckets", "use1-az4,use1-az5=b,use1-az6=c"}, wantErr: `"use1-az4" is not az=bucket`},
		{name: "AZ twice", args: []string{"-buckets", "use1-az4=a,use1-az4=b,use1-az6=c"}, wantErr: `AZ "use1-az4" is listed twice`},
		{name: "zero partitions", args: []string{"-buckets", threeBuckets, "-partitions", "0"}, wantErr: "-partitions must be positive"},
		{name: "negative pause", args: []string{"-buckets", threeBuckets, "-every", "-1s"}, wantErr: "-every must not be negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("s3express", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o, err := parseFlags(fs, c.args, c.env)
			if c.wantErr != "" {
				require.ErrorContains(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{"use1-az4", "use1-az5", "use1-az6"}, o.azs, "the leader's AZ first")
			assert.Equal(t, "wal--use1-az5--x-s3", o.buckets["use1-az5"])
		})
	}
}

// TestRunAgainstServer runs the example against the S3-compatible test
// server that scripts/test.sh starts, with three fresh directory-style
// buckets: everything but the S3 Express session auth is as on AWS.
func TestRunAgainstServer(t *testing.T) {
	endpoint := os.Getenv("ACTIVETIER_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("needs an S3 server: ACTIVETIER_S3_ENDPOINT is not set; run `bash scripts/test.sh`, which starts versitygw on 127.0.0.1")
	}
	base := fmt.Sprintf("ex%08x", rand.Uint32())
	o := options{
		azs:      []string{"use1-az4", "use1-az5", "use1-az6"},
		buckets:  make(map[string]string),
		endpoint: endpoint, prefix: "example-test/",
		partitions: 4, rounds: 20, batchBytes: 4 << 10,
		every: 2 * time.Millisecond, interval: 20 * time.Millisecond, timeout: time.Minute,
	}
	for _, az := range o.azs {
		o.buckets[az] = base + "--" + az + "--x-s3"
	}
	admin := adminStore(t, endpoint, o.buckets)
	for _, b := range o.buckets {
		_, err := admin.Client().CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(b)})
		require.NoError(t, err, "creating bucket %s", b)
	}

	var out bytes.Buffer
	res, err := run(t.Context(), o, &out)
	t.Logf("output:\n%s", out.String())
	require.NoError(t, err)

	for id, n := range res.followerBatches {
		assert.Equal(t, o.partitions*o.rounds, n, "batches replicated to broker %d", id)
	}
	assert.Positive(t, res.objects)
	assert.Equal(t, res.objects, res.objectsDeleted, "garbage collection deletes every object")
	put, get := res.requests["PutObject"], res.requests["GetObject"]
	assert.Equal(t, int64(res.objects), put.Requests, "one PUT per object")
	assert.GreaterOrEqual(t, put.BytesUp, res.produced, "objects hold every batch")
	assert.Positive(t, get.Requests)
	assert.GreaterOrEqual(t, get.BytesDown, 2*res.produced, "both followers read every batch")
	assert.Positive(t, res.requests["DeleteObjects"].Requests)
	assert.Positive(t, res.cost.ActiveTier.PutUSD)
	assert.Positive(t, res.cost.BrokerToBroker.ReplicationUSD)
	assert.Contains(t, out.String(), "replicated to broker 2")
	assert.Contains(t, out.String(), "replicated to broker 3")
	assert.Contains(t, out.String(), "cost at s3express-2025 prices")

	ctx := context.Background()
	for _, b := range o.buckets {
		objs, err := admin.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(b)})
		require.NoError(t, err)
		assert.Empty(t, objs.Contents, "bucket %s is empty after the run", b)
		_, err = admin.Client().DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(b)})
		assert.NoError(t, err, "deleting bucket %s", b)
	}
}

// TestRunMissingBuckets checks that a run against buckets that do not
// exist stops at once, naming the bucket, instead of retrying uploads
// until its timeout.
func TestRunMissingBuckets(t *testing.T) {
	endpoint := os.Getenv("ACTIVETIER_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("needs an S3 server: ACTIVETIER_S3_ENDPOINT is not set; run `bash scripts/test.sh`, which starts versitygw on 127.0.0.1")
	}
	base := fmt.Sprintf("missing%08x", rand.Uint32())
	o := options{
		azs:      []string{"use1-az4", "use1-az5", "use1-az6"},
		buckets:  make(map[string]string),
		endpoint: endpoint, partitions: 1, rounds: 1, batchBytes: 100, interval: time.Millisecond, timeout: time.Minute,
	}
	for _, az := range o.azs {
		o.buckets[az] = base + "--" + az + "--x-s3"
	}
	var out bytes.Buffer
	_, err := run(t.Context(), o, &out)
	require.ErrorContains(t, err, "bucket "+o.buckets["use1-az4"]+" of AZ use1-az4")
	require.ErrorContains(t, err, "create it first")
	assert.Empty(t, out.String(), "nothing was run")
}

// adminStore returns a store whose client creates and removes the test's
// buckets.
func adminStore(t *testing.T, endpoint string, buckets map[string]string) *s3express.Store {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(t.Context())
	require.NoError(t, err)
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	cfg.BaseEndpoint = aws.String(endpoint)
	s, err := s3express.New(cfg, s3express.Options{Buckets: buckets, LocalAZ: "use1-az4", S3Compatible: true})
	require.NoError(t, err)
	t.Cleanup(s.CloseIdleConnections)
	return s
}
