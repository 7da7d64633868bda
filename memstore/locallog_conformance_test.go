package memstore_test

import (
	"context"
	"testing"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

func TestLocalLogConformance(t *testing.T) {
	storagetest.RunLocalLog(t, storagetest.LocalLogHarness{
		New: func(context.Context, *testing.T) storage.LocalLog {
			return memstore.NewLocalLog()
		},
		InMemoryOnly: true,
	})
}
