package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/fsstore"
)

// The demo on a directory: every broker has an fsstore.Store on a
// directory per AZ, the followers end identical to their leaders, the
// report prices the run as a file system and says what that leaves out,
// and the run's directory is removed at the end.
func TestDemoStoreDir(t *testing.T) {
	root := t.TempDir()
	rep := demoJSON(t, "--store", "dir="+root, "--duration", "1500ms", "--partitions", "12", "--rate", "2", "--seed", "7")
	assert.True(t, rep.FollowersConsistent, "diverged: %v", rep.Diverged)
	assert.Equal(t, 24, rep.ReplicasCompared)
	assert.Equal(t, 2*uint64(rep.BytesProduced), rep.BytesReplicated, "every produced byte reaches both followers")
	// A directory fails no request, so no Put is retried for a failure;
	// on a loaded machine an attempt may be slow enough to hedge (or, past
	// the engine's timeout, to give up on and retry), and the attempt
	// given up on is counted as such, not as failed.
	assert.Zero(t, rep.FailedRequests, "the directory fails no request")
	requirePutOutcomes(t, &rep)
	assert.GreaterOrEqual(t, rep.Gets, rep.Puts)
	assert.Positive(t, rep.BytesUploaded)

	require.NotNil(t, rep.Store)
	assert.Nil(t, rep.S3)
	assert.Equal(t, "dir", rep.Store.Kind)
	assert.Equal(t, root, filepath.Dir(rep.Store.Location))
	assert.True(t, strings.HasPrefix(filepath.Base(rep.Store.Location), "activetier-demo-"), rep.Store.Location)
	assert.Equal(t, map[string]string{"az1": "activetier-demo-az1", "az2": "activetier-demo-az2", "az3": "activetier-demo-az3"}, rep.Store.Buckets)
	assert.False(t, rep.Store.ObjectsKept)
	assert.Empty(t, rep.Store.CleanupError)
	assert.NoDirExists(t, rep.Store.Location, "the run's directory is removed")
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing else is left in PATH")

	assert.Equal(t, "filesystem", rep.Prices)
	assert.Contains(t, rep.PricesNote, "storage and throughput charges of EFS or FSx")
	assert.Empty(t, rep.Profile, "no simulated latency")
	c := rep.Cost.ActiveTier
	assert.Zero(t, c.PutUSD+c.GetUSD+c.UploadUSD+c.RetrievalUSD, "a file system bills no requests")
	assert.Positive(t, rep.CostUSD, "the metadata log still crosses AZs")
	assert.Less(t, rep.CostUSD, rep.CrossAZCostUSD)
}

// With --keep-objects the objects garbage collection left stay in the
// run's directory, where fsstore finds as many as the report counts; an
// AZ taken down halfway fails its directory for every broker.
func TestDemoStoreDirKeepAndFailAZ(t *testing.T) {
	root := t.TempDir()
	rep := demoJSON(t, "--store", "dir="+root, "--keep-objects", "--fail-az", "az1", "--duration", "2s", "--partitions", "12", "--rate", "2", "--seed", "3")
	assert.True(t, rep.FollowersConsistent, "diverged: %v", rep.Diverged)
	require.NotNil(t, rep.Failover)
	assert.Equal(t, []int32{1}, rep.Failover.CrashedBrokers)
	assert.Equal(t, 12, rep.ReplicasCompared)
	require.NotNil(t, rep.Store)
	assert.True(t, rep.Store.ObjectsKept)
	assert.Positive(t, rep.Store.ObjectsLeft, "az1's objects outlive its broker")

	buckets := map[string]fsstore.Bucket{}
	for az, name := range rep.Store.Buckets {
		buckets[az] = fsstore.Bucket{Name: name, Dir: filepath.Join(rep.Store.Location, az)}
	}
	s, err := fsstore.New(fsstore.Options{Buckets: buckets, LocalAZ: "az2"})
	require.NoError(t, err)
	var left int
	for _, b := range buckets {
		infos, err := s.List(t.Context(), b.Name, "")
		require.NoError(t, err)
		left += len(infos)
	}
	assert.Equal(t, rep.Store.ObjectsLeft, left)
}

// The text report names the directory and the price list's limits; the
// built binary runs it as a user would.
func TestDemoStoreDirText(t *testing.T) {
	root := t.TempDir()
	r := runBinary(context.Background(), t, nil, nil, "demo", "--store", "dir="+root, "--duration", "1s", "--partitions", "6", "--rate", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	for _, want := range []string{
		"a directory per AZ (az1, az2, az3) in " + root + string(filepath.Separator) + "activetier-demo-",
		"dir         " + root + string(filepath.Separator) + "activetier-demo-",
		"objects left after garbage collection, removed",
		"consistent  yes: 12 follower logs compared",
		"cost of this run (filesystem)",
		"prices: a file system bills no requests; the storage and throughput charges of EFS or FSx, and cross-AZ transfer to reach another AZ's file system, are not modelled.",
	} {
		assert.Contains(t, r.stdout, want)
	}
}

func TestDemoStoreUsageErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--store", "dir"}, `invalid value "dir" for flag -store: "dir" is not KIND=VALUE (want dir=PATH, gcs=PREFIX)`},
		{[]string{"--store", "dir="}, `invalid value "dir=" for flag -store: "dir=" is not KIND=VALUE`},
		{[]string{"--store", "=x"}, `invalid value "=x" for flag -store: "=x" is not KIND=VALUE`},
		{[]string{"--store", "s3=bucket"}, `invalid value "s3=bucket" for flag -store: unknown store kind "s3" (want dir=PATH, gcs=PREFIX)`},
		{[]string{"--store", ""}, `invalid value "" for flag -store: "" is not KIND=VALUE`},
		{[]string{"--store", "dir=/tmp", "--s3-endpoint", "http://127.0.0.1:1"}, "--store dir=/tmp: cannot be combined with --s3-endpoint"},
		{[]string{"--store", "dir=/tmp", "--profile", "none"}, "--profile none: has no effect with --store"},
		{[]string{"--store", "dir=/tmp", "--buckets", "az1=a"}, "--buckets az1=a: needs --s3-endpoint"},
		{[]string{"--keep-objects"}, "--keep-objects true: needs --s3-endpoint or --store"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCmd(t, "", append([]string{"demo"}, tc.args...)...)
			assert.Equal(t, exitUsage, r.code)
			assert.Empty(t, r.stdout)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			assert.Contains(t, r.stderr, "activetier demo: "+tc.want)
		})
	}
	// A PATH that is not a directory fails the run, naming it, before
	// anything is produced.
	for _, path := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		r := runCmd(t, "", "demo", "--json", "--store", "dir="+path, "--duration", "1s")
		assert.Equal(t, exitFailure, r.code)
		assert.Empty(t, r.stdout)
		assert.Contains(t, r.stderr, "activetier demo: --store dir="+path+": ")
	}
}

// The report's JSON has the store's fields under "store".
func TestDemoStoreReportJSONShape(t *testing.T) {
	b, err := json.Marshal(&demoReport{Store: &storeReport{Kind: "dir", Location: "/x", Buckets: map[string]string{"az1": "b"}}, PricesNote: "n"})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"prices_note":"n"`)
	assert.Contains(t, string(b), `"store":{"kind":"dir","location":"/x","buckets":{"az1":"b"},"objects_left":0,"objects_kept":false}`)
}
