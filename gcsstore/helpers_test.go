package gcsstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/api/googleapi"

	"github.com/activetier/activetier/gcsstore"
	"github.com/activetier/activetier/internal/harness/testenv"
	"github.com/activetier/activetier/storage"
)

// The tests in conformance_test.go and emulator_test.go need a real Cloud
// Storage emulator. scripts/test.sh starts fake-gcs-server and sets
// ACTIVETIER_GCS_ENDPOINT, and ACTIVETIER_REQUIRE_SERVERS so that a missing
// endpoint fails those tests instead of skipping them. Under a plain
// `go test` without the endpoint they skip.
const (
	endpointEnv = "ACTIVETIER_GCS_ENDPOINT"
)

// gcsEndpoint returns the emulator's URL, or ends the test (see testenv).
func gcsEndpoint(t testing.TB) string {
	t.Helper()
	return testenv.Server(t, endpointEnv, "a Cloud Storage emulator")
}

// Zones and buckets of a three-zone deployment.
const (
	zoneA, zoneB, zoneC = "us-central1-a", "us-central1-b", "us-central1-c"
)

var emulatorBuckets = map[string]string{
	zoneA: "activetier-test-us-central1-a",
	zoneB: "activetier-test-us-central1-b",
	zoneC: "activetier-test-us-central1-c",
}

// newStore returns a store over endpoint in localZone, closed when the test
// ends.
func newStore(t testing.TB, endpoint string, buckets map[string]string, localZone string, mod func(*gcsstore.Options)) *gcsstore.Store {
	t.Helper()
	opts := gcsstore.Options{Buckets: buckets, LocalAZ: localZone, Endpoint: endpoint}
	if mod != nil {
		mod(&opts)
	}
	s, err := gcsstore.New(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// createBuckets creates the buckets on the emulator if they are not there.
func createBuckets(t testing.TB, endpoint string, buckets map[string]string) {
	t.Helper()
	s := newStore(t, endpoint, buckets, zoneA, nil)
	for _, b := range buckets {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.Client().Bucket(b).Create(ctx, "activetier-test", nil)
		cancel()
		var apiErr *googleapi.Error
		if errors.As(err, &apiErr) && apiErr.Code == 409 {
			err = nil
		}
		require.NoError(t, err, "creating bucket %s", b)
	}
}

// allKinds are the sentinels an error may be classified as.
var allKinds = []error{
	storage.ErrNotFound, storage.ErrAlreadyExists, storage.ErrUnavailable, storage.ErrInvalidRange,
	storage.ErrUnknownBucket, storage.ErrPermanent, gcsstore.ErrInvalidKey,
}

// requireKind asserts err matches exactly want among allKinds (none, for
// want nil).
func requireKind(t *testing.T, err error, want error, msg string) {
	t.Helper()
	require.Error(t, err, msg)
	for _, k := range allKinds {
		if k == want {
			require.ErrorIs(t, err, k, msg)
		} else {
			require.False(t, errors.Is(err, k), "%s: error %q must not match %v", msg, err, k)
		}
	}
}
