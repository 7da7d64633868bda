package s3express_test

import (
	"context"
	"testing"

	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

// TestConformance runs the ObjectStore conformance suite against the test
// server with directory bucket names, with standard names, and with a key
// prefix. The two stores of each subtest are brokers in different AZs of
// a three-AZ deployment.
func TestConformance(t *testing.T) {
	cfg := serverConfig(t)
	cases := []struct {
		name      string
		buckets   map[string]string
		keyPrefix string
	}{
		{"directory-names", directoryBuckets, ""},
		{"standard-names", standardBuckets, ""},
		{"directory-names-key-prefix", directoryBuckets, "deployment-7/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			createBuckets(t, cfg, c.buckets)
			mod := func(o *s3express.Options) { o.KeyPrefix = c.keyPrefix }
			storagetest.Run(t, storagetest.HarnessFunc(
				func(ctx context.Context, t *testing.T) (local, peer storage.ObjectStore) {
					return newServerStore(t, cfg, c.buckets, azA, mod), newServerStore(t, cfg, c.buckets, azB, mod)
				}))
		})
	}
}
