package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/testenv"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
)

// endpointEnv names the S3-compatible server of the tests that need one.
// scripts/test.sh starts versitygw on 127.0.0.1 and sets it, with the
// standard AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION.
const endpointEnv = "ACTIVETIER_S3_ENDPOINT"

func s3TestEndpoint(t *testing.T) string {
	t.Helper()
	return testenv.Server(t, endpointEnv, "an S3 server")
}

// testBuckets names fresh buckets on the server for the given AZs (a
// standard name, or with directory true a directory-style name, which
// needs AZ ids such as use1-az1), for the demo to create with
// --create-buckets. When the test ends they are emptied and removed. It
// returns the --buckets value and an S3 client for looking into them.
func testBuckets(t *testing.T, endpoint string, directory bool, azs ...string) (string, map[string]string, *s3.Client) {
	t.Helper()
	base := fmt.Sprintf("atdemo%08x", rand.Uint32())
	buckets := make(map[string]string, len(azs))
	pairs := make([]string, len(azs))
	for i, az := range azs {
		buckets[az] = base + "-" + az
		if directory {
			buckets[az] = base + "--" + az + "--x-s3"
		}
		pairs[i] = az + "=" + buckets[az]
	}
	cfg, err := config.LoadDefaultConfig(t.Context())
	require.NoError(t, err)
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	cfg.BaseEndpoint = aws.String(endpoint)
	// s3express's compatibility settings are what directory-style names
	// need against a local server.
	admin, err := s3express.New(cfg, s3express.Options{Buckets: buckets, LocalAZ: azs[0], S3Compatible: true})
	require.NoError(t, err)
	client := admin.Client()
	t.Cleanup(func() {
		ctx := context.Background()
		for _, b := range buckets {
			keys, exists := listBucket(t, client, b, "")
			if !exists {
				continue
			}
			for _, key := range keys {
				_, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String(key)})
				assert.NoError(t, err)
			}
			_, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(b)})
			assert.NoError(t, err, "removing bucket %s", b)
		}
		admin.CloseIdleConnections()
	})
	return strings.Join(pairs, ","), buckets, client
}

// listKeys lists the keys under prefix in bucket, which must exist.
func listKeys(t *testing.T, client *s3.Client, bucket, prefix string) []string {
	t.Helper()
	keys, exists := listBucket(t, client, bucket, prefix)
	require.True(t, exists, "bucket %s does not exist", bucket)
	return keys
}

// listBucket lists the keys under prefix in bucket, and whether the bucket
// exists.
func listBucket(t *testing.T, client *s3.Client, bucket, prefix string) (keys []string, exists bool) {
	t.Helper()
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchBucket" {
			return nil, false
		}
		require.NoError(t, err, "listing %s", bucket)
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, true
}

// requirePutOutcomes requires rep's PUTs to be accounted for: each ended
// stored, failed or given up on; each object was stored by one PUT and a
// PUT stored beyond that is a hedge's twin; and a PUT beyond one per
// object is a hedge or a retry, by the SDK of a failed attempt or by the
// engine of a failed or given-up one.
func requirePutOutcomes(t *testing.T, rep *demoReport) {
	t.Helper()
	require.NotNil(t, rep.PutOutcomes)
	o := *rep.PutOutcomes
	assert.Equal(t, rep.Puts, o.Stored+o.Failed+o.GivenUp, "every PUT stored, failed or given up on: %+v", o)
	assert.GreaterOrEqual(t, o.Stored, int64(rep.Objects), "each object stored by a PUT: %+v", o)
	assert.LessOrEqual(t, o.Stored, int64(rep.Objects+rep.HedgedPuts), "a PUT stored beyond one per object is a hedge's twin: %+v", o)
	assert.LessOrEqual(t, o.Failed, rep.FailedRequests)
	assert.LessOrEqual(t, o.GivenUp, rep.GivenUpRequests)
	assert.LessOrEqual(t, rep.Puts, int64(rep.Objects+rep.HedgedPuts+rep.UploadRetries)+o.Failed,
		"a PUT beyond one per object is a hedge, or a retry of a failed or given-up one: %+v", o)
}

// The demo over a real S3 server: the buckets are created, the followers
// end consistent, the requests are counted from the wire, and nothing is
// left in the buckets afterwards.
func TestDemoS3(t *testing.T) {
	endpoint := s3TestEndpoint(t)
	flagValue, buckets, client := testBuckets(t, endpoint, false, "az1", "az2", "az3")
	rep := demoJSON(t, "--s3-endpoint", endpoint, "--buckets", flagValue, "--create-buckets",
		"--duration", "1500ms", "--partitions", "12", "--rate", "2", "--seed", "7")

	assert.True(t, rep.FollowersConsistent, "diverged: %v", rep.Diverged)
	assert.Equal(t, 24, rep.ReplicasCompared)
	assert.Equal(t, 2*uint64(rep.BytesProduced), rep.BytesReplicated)
	assert.Positive(t, rep.Puts)
	assert.Positive(t, rep.Gets)
	// A real server shared with other tests may fail a request now and then,
	// and a loaded machine may make an attempt slow enough to hedge or to
	// give up on; the SDK or the engine retries it. Every PUT ends one way;
	// each object was stored by one, and another that stored too is a
	// hedge's twin; every other PUT failed or was given up on.
	requirePutOutcomes(t, &rep)
	assert.GreaterOrEqual(t, rep.Gets, int64(rep.Objects), "each object is read by at least one follower")
	assert.Positive(t, rep.BytesUploaded)
	assert.Less(t, rep.BytesUploaded, rep.BytesProduced, "zstd objects are smaller than the batches")
	assert.Positive(t, rep.BytesDownloaded)
	// At 2 MB/s, like for like, activetier need not be cheaper (see
	// TestDemoJSON); against the uncompressed batches it is.
	assert.Positive(t, rep.SavingsRatioUncompressed)

	require.NotNil(t, rep.S3)
	assert.Equal(t, endpoint, rep.S3.Endpoint)
	assert.Equal(t, buckets, rep.S3.Buckets)
	assert.Regexp(t, `^activetier-demo/\d{8}T\d{6}Z-[0-9a-f]{8}/$`, rep.S3.KeyPrefix)
	assert.False(t, rep.S3.ObjectsKept)
	assert.LessOrEqual(t, rep.S3.ObjectsLeft, int(rep.Objects-rep.ObjectsDeleted))
	for az, b := range buckets {
		assert.Empty(t, listKeys(t, client, b, ""), "bucket %s of %s after the run", b, az)
	}
}

// --fail-az over S3, with directory-style bucket names whose AZ ids name
// the AZs: the survivors end consistent, and the sweep empties every
// bucket, the failed AZ's included, where garbage collection stopped.
func TestDemoS3FailAZ(t *testing.T) {
	endpoint := s3TestEndpoint(t)
	flagValue, buckets, client := testBuckets(t, endpoint, true, "use1-az1", "use1-az2", "use1-az3")
	rep := demoJSON(t, "--s3-endpoint", endpoint, "--buckets", flagValue, "--create-buckets", "--fail-az", "use1-az2",
		"--duration", "2s", "--partitions", "12", "--rate", "2", "--seed", "3")

	assert.True(t, rep.FollowersConsistent, "diverged: %v", rep.Diverged)
	require.NotNil(t, rep.Failover)
	assert.Equal(t, "use1-az2", rep.Failover.AZ)
	assert.Equal(t, []int32{2}, rep.Failover.CrashedBrokers)
	assert.Equal(t, 4, rep.Failover.PartitionsMoved)
	assert.Equal(t, 12, rep.ReplicasCompared)
	assert.Positive(t, rep.Puts)
	assert.Positive(t, rep.Gets)
	require.NotNil(t, rep.S3)
	// Broker 2 is a replica of every partition and never reports again,
	// so no object written after it crashed is collected.
	assert.Positive(t, rep.S3.ObjectsLeft)
	for _, b := range buckets {
		assert.Empty(t, listKeys(t, client, b, ""), "bucket %s after the run", b)
	}
}

// With --keep-objects the objects garbage collection left stay under the
// run's prefix, as many as the report says, and inspect reads them.
func TestDemoS3KeepObjects(t *testing.T) {
	endpoint := s3TestEndpoint(t)
	flagValue, buckets, client := testBuckets(t, endpoint, false, "az1", "az2", "az3")
	r := runCmd(t, "", "demo", "--s3-endpoint", endpoint, "--buckets", flagValue, "--create-buckets", "--keep-objects",
		"--fail-az", "az1", "--duration", "1500ms", "--partitions", "6", "--rate", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "; buckets "+flagValue+" at "+endpoint+" under activetier-demo/")
	assert.Contains(t, r.stdout, "az1 goes down: every store refuses requests to its bucket (a simulated outage) and its brokers crash")
	m := regexp.MustCompile(`(?m)^s3 +` + regexp.QuoteMeta(endpoint) + ` under (\S+): (\d+) objects left after garbage collection, kept$`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	prefix := m[1]
	left, err := strconv.Atoi(m[2])
	require.NoError(t, err)
	require.Positive(t, left, "the crashed broker never reports again")

	var kept []string
	var keptBucket string
	for _, az := range slices.Sorted(maps.Keys(buckets)) {
		keys := listKeys(t, client, buckets[az], prefix)
		if len(keys) > 0 {
			keptBucket = buckets[az]
		}
		kept = append(kept, keys...)
	}
	assert.Len(t, kept, left)
	require.NotEmpty(t, kept)
	key := kept[len(kept)-1]
	r = runCmd(t, "", "inspect", "--s3-endpoint", endpoint, "--bucket", keptBucket, key)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "verified")
}

// An interrupt stops the demo with exit code 130 and no report, and what
// the run wrote is deleted all the same.
func TestDemoS3Interrupted(t *testing.T) {
	endpoint := s3TestEndpoint(t)
	flagValue, buckets, client := testBuckets(t, endpoint, false, "az1", "az2", "az3")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	time.AfterFunc(time.Second, cancel) // as signal.NotifyContext does on SIGINT
	var out, errOut strings.Builder
	code := run(ctx, []string{"demo", "--json", "--s3-endpoint", endpoint, "--buckets", flagValue, "--create-buckets",
		"--duration", "1m", "--partitions", "6", "--rate", "1"}, strings.NewReader(""), &out, &errOut)
	assert.Equal(t, exitInterrupted, code)
	assert.Equal(t, "activetier demo: interrupted\n", errOut.String())
	assert.Empty(t, out.String())
	for _, b := range buckets {
		assert.Empty(t, listKeys(t, client, b, ""), "bucket %s after the interrupt", b)
	}
}

// The S3 backend itself: requests and bytes are counted as sent, and an
// outage makes every store's requests to that AZ's bucket fail with
// storage.ErrUnavailable, counted as failed, while the others work.
func TestS3ObjectsAccountingAndOutage(t *testing.T) {
	endpoint := s3TestEndpoint(t)
	flagValue, _, _ := testBuckets(t, endpoint, false, "az1", "az2")
	o := &s3DemoOptions{endpoint: endpoint, compatible: true, create: true}
	require.NoError(t, o.buckets.Set(flagValue))
	ctx := t.Context()
	objs, err := openS3Objects(ctx, o, o.buckets.azs)
	require.NoError(t, err)
	t.Cleanup(objs.close)
	assert.Equal(t, requestCounts{outcomes: true}, objs.requests(), "checking and creating the buckets is not the run's")
	in1, err := objs.store("az1")
	require.NoError(t, err)
	in2, err := objs.store("az2")
	require.NoError(t, err)

	body := []byte(strings.Repeat("activetier ", 1000))
	ref, err := in1.Put(ctx, "a/object", body)
	require.NoError(t, err)
	got, err := in2.GetRange(ctx, ref, 100, 500)
	require.NoError(t, err)
	require.Equal(t, body[100:600], got)
	infos, err := in2.List(ctx, ref.Bucket, "a/")
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, requestCounts{puts: 1, gets: 1, lists: 1, bytesUp: int64(len(body)), bytesDown: 500, outcomes: true, putsStored: 1}, objs.requests())

	require.NoError(t, objs.setOutage("az1"))
	_, err = in2.GetRange(ctx, ref, 0, 10)
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.Contains(t, err.Error(), "AZ az1 is down (simulated outage)")
	_, err = in1.Put(ctx, "a/second", body)
	require.ErrorIs(t, err, storage.ErrUnavailable)
	require.ErrorIs(t, in1.Delete(ctx, []metadata.ObjectRef{ref}), storage.ErrUnavailable)
	after := objs.requests()
	assert.Equal(t, after.puts-1+after.gets-1+after.deletes, after.failed, "every request to the dead bucket failed, each retry counted")
	assert.Equal(t, after.puts-1, after.putsFailed)
	assert.Zero(t, after.givenUp)
	assert.GreaterOrEqual(t, after.failed, int64(3))

	other, err := in2.Put(ctx, "a/object", body)
	require.NoError(t, err, "az2 is unaffected")
	_, err = in1.GetRange(ctx, other, 0, 10)
	require.NoError(t, err, "and readable from az1's broker")
	require.Error(t, objs.setOutage("az9"))

	left, err := objs.cleanup(ctx, false)
	require.NoError(t, err)
	assert.Equal(t, 2, left, "one object in each bucket, az1's despite the outage")
	left, err = objs.cleanup(ctx, false)
	require.NoError(t, err)
	assert.Zero(t, left)
}

// A request that ends after its caller stopped waiting is given up on,
// whatever the store answered, and not failed; a PUT's success counts as
// stored once its answer is closed while its caller still waits.
func TestRequestCountersEnded(t *testing.T) {
	var c requestCounters
	live := t.Context()
	done, cancel := context.WithCancel(live)
	cancel()
	refused := errors.New("refused")
	c.ended(live, true, nil)
	c.ended(live, true, refused)
	c.ended(done, true, context.Canceled)
	c.ended(done, false, refused)
	c.ended(live, false, refused)
	c.ended(live, false, nil)
	for _, ctx := range []context.Context{live, done} {
		a := &putAnswer{ReadCloser: io.NopCloser(strings.NewReader("")), ctx: ctx, c: &c}
		require.NoError(t, a.Close())
		require.NoError(t, a.Close(), "counted once")
	}
	assert.Equal(t, requestCounts{outcomes: true, failed: 2, givenUp: 3, putsStored: 2, putsFailed: 1, putsGivenUp: 2}, c.load())
}

// A missing bucket and an endpoint nobody answers at stop the demo before
// it starts, with one line and exit code 1.
func TestDemoS3Unavailable(t *testing.T) {
	t.Run("missing bucket", func(t *testing.T) {
		endpoint := s3TestEndpoint(t)
		flagValue, _, _ := testBuckets(t, endpoint, false, "az1", "az2")
		r := runCmd(t, "", "demo", "--s3-endpoint", endpoint, "--buckets", flagValue, "--rf", "2", "--duration", "1s")
		assert.Equal(t, exitFailure, r.code)
		assert.Empty(t, r.stdout)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
		assert.Contains(t, r.stderr, "activetier demo: bucket "+strings.TrimPrefix(strings.Split(flagValue, ",")[0], "az1=")+" (AZ az1) does not exist at "+endpoint+": create it, or pass --create-buckets")
	})
	t.Run("unreachable", func(t *testing.T) {
		// A port that was just free refuses connections. Credentials are
		// set so that the request is signed and sent, not stopped earlier.
		t.Setenv("AWS_ACCESS_KEY_ID", "test")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
		t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		endpoint := "http://" + ln.Addr().String()
		require.NoError(t, ln.Close())
		r := runCmd(t, "", "demo", "--s3-endpoint", endpoint, "--duration", "1s")
		assert.Equal(t, exitFailure, r.code)
		assert.Empty(t, r.stdout)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
		assert.Contains(t, r.stderr, "activetier demo: cannot reach the S3 endpoint "+endpoint+": ")
		assert.Contains(t, r.stderr, "connection refused")
	})
}

// The S3 flags' mistakes, found before any request: exit 2, one line
// naming the flag.
func TestDemoS3UsageErrors(t *testing.T) {
	const ep = "http://127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--buckets", "az1=a-bucket"}, "--buckets az1=a-bucket: needs --s3-endpoint"},
		{[]string{"--keep-objects"}, "--keep-objects true: needs --s3-endpoint"},
		{[]string{"--create-buckets"}, "--create-buckets true: needs --s3-endpoint"},
		{[]string{"--s3-compatible=false"}, "--s3-compatible false: needs --s3-endpoint"},
		{[]string{"--region", "eu-west-1"}, "--region eu-west-1: needs --s3-endpoint"},
		{[]string{"--s3-endpoint", ""}, "--s3-endpoint : is empty"},
		{[]string{"--s3-endpoint", "127.0.0.1:7070"}, "--s3-endpoint 127.0.0.1:7070: want a URL such as http://127.0.0.1:7070"},
		{[]string{"--s3-endpoint", "ftp://host"}, "--s3-endpoint ftp://host: want a URL"},
		{[]string{"--s3-endpoint", ep, "--buckets", "az1"}, `invalid value "az1" for flag -buckets: "az1" is not AZ=BUCKET`},
		{[]string{"--s3-endpoint", ep, "--buckets", "az1=,az2=b"}, `invalid value "az1=,az2=b" for flag -buckets: "az1=" is not AZ=BUCKET`},
		{[]string{"--s3-endpoint", ep, "--buckets", "az1=aaa,az1=bbb"}, `invalid value "az1=aaa,az1=bbb" for flag -buckets: AZ "az1" is given twice`},
		{[]string{"--s3-endpoint", ep, "--buckets", "az1=aaa,az2=aaa"}, `invalid value "az1=aaa,az2=aaa" for flag -buckets: bucket "aaa" is given for AZs "az1" and "az2"`},
		{[]string{"--s3-endpoint", ep, "--buckets", "az1=Not_A_Bucket,az2=bbb"}, `--buckets az1=Not_A_Bucket,az2=bbb: Options.Buckets["az1"]: bucket name "Not_A_Bucket"`},
		{[]string{"--s3-endpoint", ep, "--buckets", "use1-az1=x--use1-az2--x-s3,use1-az2=y--use1-az1--x-s3"}, `--buckets use1-az1=x--use1-az2--x-s3,use1-az2=y--use1-az1--x-s3: Options.Buckets["use1-az1"]: directory bucket "x--use1-az2--x-s3" is in AZ "use1-az2", not "use1-az1"`},
		{[]string{"--s3-endpoint", ep, "--buckets", "a=aaa,b=bbb", "--azs", "3"}, "--azs 3: must be the number of AZs --buckets names (2), or left out"},
		{[]string{"--s3-endpoint", ep, "--buckets", "a=aaa,b=bbb"}, "--rf 3: must be at most the AZs of --buckets (2)"},
		{[]string{"--s3-endpoint", ep, "--buckets", "a=aaa,b=bbb,c=ccc,d=ddd"}, "--buckets a=aaa,b=bbb,c=ccc,d=ddd: names 4 AZs, more than --brokers (3)"},
		{[]string{"--s3-endpoint", ep, "--buckets", "a=aaa,b=bbb,c=ccc", "--fail-az", "az1"}, "--fail-az az1: no such AZ (want one of a, b, c)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCmd(t, "", append([]string{"demo"}, tc.args...)...)
			assert.Equal(t, exitUsage, r.code)
			assert.Empty(t, r.stdout)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			assert.Contains(t, r.stderr, "activetier demo: "+tc.want)
		})
	}
}

// --buckets given in pieces adds up, in order; its String is what
// flagError prints.
func TestBucketsFlag(t *testing.T) {
	var b bucketsFlag
	require.NoError(t, b.Set(" use1-az4 = wal--use1-az4--x-s3 ,use1-az5=wal--use1-az5--x-s3"))
	require.NoError(t, b.Set("use1-az6=wal--use1-az6--x-s3"))
	assert.Equal(t, []string{"use1-az4", "use1-az5", "use1-az6"}, b.azs)
	assert.Equal(t, "wal--use1-az5--x-s3", b.byAZ["use1-az5"])
	assert.Equal(t, "use1-az4=wal--use1-az4--x-s3,use1-az5=wal--use1-az5--x-s3,use1-az6=wal--use1-az6--x-s3", b.String())
	require.Error(t, b.Set("use1-az4=other"), "an AZ already given")
	var empty bucketsFlag
	assert.Empty(t, empty.String())
	require.Error(t, empty.Set(""))
}

// Run prefixes sort by time and differ within one second.
func TestRunPrefix(t *testing.T) {
	seen := make(map[string]bool)
	for range 100 {
		p, err := runPrefix(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(p, "activetier-demo/20250601T120000Z-"), p)
		require.False(t, seen[p], "prefix %s repeated", p)
		seen[p] = true
	}
}

// What the report says of the objects a run left on S3: deleted, kept, or
// a failure to delete them, which the command then exits 1 for.
func TestReportS3Line(t *testing.T) {
	for _, tc := range []struct {
		s3   s3Report
		want string
	}{
		{s3Report{ObjectsLeft: 3}, "3 objects left after garbage collection, deleted\n"},
		{s3Report{ObjectsLeft: 5, ObjectsKept: true}, "5 objects left after garbage collection, kept\n"},
		{s3Report{ObjectsLeft: 2, CleanupError: "deleting the 2 objects: access denied"}, "2 objects left after garbage collection, NOT deleted: deleting the 2 objects: access denied\n"},
	} {
		tc.s3.Endpoint, tc.s3.KeyPrefix = "http://127.0.0.1:7070", "activetier-demo/x/"
		rep := demoReport{S3: &tc.s3}
		var out strings.Builder
		require.NoError(t, rep.writeText(&out))
		assert.Contains(t, out.String(), "\ns3 ")
		assert.Contains(t, out.String(), " http://127.0.0.1:7070 under activetier-demo/x/: "+tc.want)
	}
}
