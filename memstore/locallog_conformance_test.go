package memstore_test

import (
	"context"
	"testing"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/walstore"
	"github.com/activetier/activetier/walstore/walstoretest"
)

func TestLocalLogConformance(t *testing.T) {
	walstoretest.RunLocalLog(t, walstoretest.LocalLogHarness{
		New: func(context.Context, *testing.T) walstore.LocalLog {
			return memstore.NewLocalLog()
		},
		InMemoryOnly: true,
	})
}
