package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	gcs "cloud.google.com/go/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/iterator"

	"github.com/activetier/activetier/gcsstore"
	"github.com/activetier/activetier/internal/harness/testenv"
)

// gcsTestEndpoint returns the Cloud Storage emulator scripts/test.sh
// started (fake-gcs-server on 127.0.0.1), or skips the test under a plain
// `go test`; under the script (ACTIVETIER_REQUIRE_SERVERS set) a missing
// endpoint fails the test instead.
func gcsTestEndpoint(t *testing.T) string {
	t.Helper()
	return testenv.Server(t, gcsEndpointEnv, "a Cloud Storage emulator")
}

// gcsTestPrefix returns a bucket prefix no other test uses, the buckets
// the demo makes of it for az1..az3, and a client on the emulator for
// looking into them. When the test ends the buckets are emptied and
// removed.
func gcsTestPrefix(t *testing.T, endpoint string) (string, map[string]string, *gcs.Client) {
	t.Helper()
	prefix := fmt.Sprintf("atdemo%08x", rand.Uint32())
	buckets := map[string]string{"az1": prefix + "-az1", "az2": prefix + "-az2", "az3": prefix + "-az3"}
	st, err := gcsstore.New(t.Context(), gcsstore.Options{Buckets: buckets, LocalAZ: "az1", Endpoint: endpoint})
	require.NoError(t, err)
	client := st.Client()
	t.Cleanup(func() {
		ctx := context.Background()
		for _, b := range buckets {
			for _, name := range gcsObjectNames(t, client, b, "") {
				assert.NoError(t, client.Bucket(b).Object(name).Delete(ctx))
			}
			if err := client.Bucket(b).Delete(ctx); err != nil && !errors.Is(err, gcs.ErrBucketNotExist) {
				t.Errorf("removing bucket %s: %v", b, err)
			}
		}
		assert.NoError(t, st.Close())
	})
	return prefix, buckets, client
}

// gcsObjectNames lists the names in bucket under prefix (none for a
// missing bucket).
func gcsObjectNames(t *testing.T, client *gcs.Client, bucket, prefix string) []string {
	t.Helper()
	var names []string
	it := client.Bucket(bucket).Objects(context.Background(), &gcs.Query{Prefix: prefix})
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) || errors.Is(err, gcs.ErrBucketNotExist) {
			return names
		}
		require.NoError(t, err, "listing bucket %s", bucket)
		names = append(names, a.Name)
	}
}

// The demo on Cloud Storage through the emulator: the buckets it lacks are
// created, the followers end identical to their leaders, the run is priced
// with regional Standard's list, and nothing the run wrote is left in the
// buckets.
func TestDemoStoreGCS(t *testing.T) {
	endpoint := gcsTestEndpoint(t)
	prefix, buckets, client := gcsTestPrefix(t, endpoint)
	rep := demoJSON(t, "--store", "gcs="+prefix, "--duration", "1500ms", "--partitions", "12", "--rate", "2", "--seed", "7")

	assert.True(t, rep.FollowersConsistent, "diverged: %v", rep.Diverged)
	assert.Equal(t, 24, rep.ReplicasCompared)
	assert.Equal(t, 2*uint64(rep.BytesProduced), rep.BytesReplicated, "every produced byte reaches both followers")
	// Calls are counted, not the store's own attempts; a Put call that
	// failed or was given up on is retried by the engine, and only those
	// and the hedges exceed the objects.
	requirePutOutcomes(t, &rep)
	assert.GreaterOrEqual(t, rep.Gets, int64(rep.Objects), "each object is read by at least one follower")
	assert.GreaterOrEqual(t, rep.Deletes, int64(rep.ObjectsDeleted), "Cloud Storage deletes one object per request")
	assert.Positive(t, rep.BytesUploaded)
	assert.Positive(t, rep.BytesDownloaded)

	require.NotNil(t, rep.Store)
	assert.Nil(t, rep.S3)
	assert.Equal(t, "gcs", rep.Store.Kind)
	assert.Regexp(t, `^`+regexp.QuoteMeta(endpoint)+` under activetier-demo/\d{8}T\d{6}Z-[0-9a-f]{8}/$`, rep.Store.Location)
	assert.Equal(t, buckets, rep.Store.Buckets)
	assert.False(t, rep.Store.ObjectsKept)
	assert.Empty(t, rep.Store.CleanupError)
	for az, b := range buckets {
		_, err := client.Bucket(b).Attrs(t.Context())
		require.NoError(t, err, "the run created bucket %s of %s", b, az)
		assert.Empty(t, gcsObjectNames(t, client, b, ""), "bucket %s of %s after the run", b, az)
	}

	assert.Equal(t, "gcsstandard-2026", rep.Prices)
	assert.Empty(t, rep.Profile, "no simulated latency")
	// Uploads are Class A operations, ranged reads Class B. At this
	// run's few MB/s the uploads alone may cost more than replicating the
	// bytes across zones, so the comparison is not asserted.
	c := rep.Cost.ActiveTier
	assert.InDelta(t, float64(rep.Puts)*0.005/1000, c.PutUSD, 1e-12)
	assert.InDelta(t, float64(rep.Gets)*0.0004/1000, c.GetUSD, 1e-12)
	assert.Zero(t, c.UploadUSD+c.RetrievalUSD, "no per-byte fee within a region")
}

// The buckets exist already (an earlier run made them); with --fail-az
// and --keep-objects the survivors end consistent and the objects
// garbage collection left stay under the run's prefix, as many as the
// report counts. The built binary runs it as a user would, and its report
// names the endpoint and the prefix.
func TestDemoStoreGCSKeepAndFailAZ(t *testing.T) {
	endpoint := gcsTestEndpoint(t)
	prefix, buckets, client := gcsTestPrefix(t, endpoint)
	for _, b := range buckets {
		require.NoError(t, client.Bucket(b).Create(t.Context(), "activetier-test", nil))
	}
	r := runBinary(t.Context(), t, nil, nil, "demo", "--store", "gcs="+prefix, "--keep-objects", "--fail-az", "az1",
		"--duration", "2s", "--partitions", "12", "--rate", "2", "--seed", "3")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	assert.Contains(t, r.stdout, "; Cloud Storage buckets az1="+prefix+"-az1,az2="+prefix+"-az2,az3="+prefix+"-az3 at "+endpoint+" under activetier-demo/")
	assert.Contains(t, r.stdout, "az1 goes down: every store refuses requests to its bucket (a simulated outage) and its brokers crash")
	assert.Contains(t, r.stdout, "consistent  yes: 12 follower logs compared")
	assert.Contains(t, r.stdout, "cost of this run (gcsstandard-2026)")
	m := regexp.MustCompile(`(?m)^gcs +` + regexp.QuoteMeta(endpoint) + ` under (\S+): (\d+) objects left after garbage collection, kept$`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	left, err := strconv.Atoi(m[2])
	require.NoError(t, err)
	assert.Positive(t, left, "az1's objects outlive its broker")

	var kept int
	for _, b := range buckets {
		names := gcsObjectNames(t, client, b, m[1])
		kept += len(names)
		assert.Len(t, gcsObjectNames(t, client, b, ""), len(names), "nothing outside the run's prefix in %s", b)
	}
	assert.Equal(t, left, kept)
}

// A prefix that makes no valid bucket name, and an emulator that is not
// there, fail the run before anything is produced, naming the flag.
func TestDemoStoreGCSErrors(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		want         []string
	}{
		{"uppercase", "Wal", []string{`--store gcs=Wal: gcsstore: Options.Buckets["az1"]: bucket name "Wal-az1" must start and end with a lowercase letter or digit`}},
		{"too long", strings.Repeat("w", 60), []string{"--store gcs=" + strings.Repeat("w", 60) + `: gcsstore: Options.Buckets["az1"]: bucket name`, "must be 1 to 63 characters"}},
		{"reserved", "google-wal", []string{`--store gcs=google-wal: gcsstore: Options.Buckets["az1"]: bucket name "google-wal-az1": names starting with "goog" or containing "google" are reserved`}},
		{"no emulator", "atdemo-unreachable", []string{"--store gcs=atdemo-unreachable: checking bucket atdemo-unreachable-az1 (AZ az1) at http://127.0.0.1:1: ", "connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Nothing listens on port 1; bad bucket names are refused
			// before any request.
			env := []string{gcsEndpointEnv + "=http://127.0.0.1:1"}
			r := runBinary(t.Context(), t, nil, env, "demo", "--json", "--store", "gcs="+tc.prefix, "--duration", "1s")
			assert.Equal(t, exitFailure, r.code)
			assert.Empty(t, r.stdout)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			assert.True(t, strings.HasPrefix(r.stderr, "activetier demo: "), r.stderr)
			for _, want := range tc.want {
				assert.Contains(t, r.stderr, want)
			}
		})
	}
}
