package gcsstore_test

import (
	"context"
	"testing"

	"github.com/activetier/activetier/gcsstore"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

// TestConformance runs the ObjectStore conformance suite against the
// emulator, without and with a key prefix. The two stores of each subtest
// are brokers in different zones of a three-zone deployment.
func TestConformance(t *testing.T) {
	ep := gcsEndpoint(t)
	createBuckets(t, ep, emulatorBuckets)
	for _, prefix := range []string{"", "deployment-7/"} {
		name := "no-prefix"
		if prefix != "" {
			name = "key-prefix"
		}
		t.Run(name, func(t *testing.T) {
			mod := func(o *gcsstore.Options) { o.KeyPrefix = prefix }
			storagetest.Run(t, storagetest.HarnessFunc(
				func(ctx context.Context, t *testing.T) (local, peer storage.ObjectStore) {
					return newStore(t, ep, emulatorBuckets, zoneA, mod), newStore(t, ep, emulatorBuckets, zoneB, mod)
				}))
		})
	}
}
