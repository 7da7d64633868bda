package storagetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// optional is an interface an ObjectStore may implement besides
// storage.ObjectStore, which the engines look for with a type assertion:
// a wrapper that does not pass it on turns the feature off silently.
type optional struct {
	name string
	// has reports whether s implements the interface.
	has func(s storage.ObjectStore) bool
	// add returns s implementing the interface, as a store that has it
	// would, with s's own behaviour otherwise.
	add func(s storage.ObjectStore) storage.ObjectStore
}

// optionals lists every optional interface of storage.ObjectStore.
var optionals = []optional{{
	name: "storage.RangeReader",
	has:  func(s storage.ObjectStore) bool { _, ok := s.(storage.RangeReader); return ok },
	add: func(s storage.ObjectStore) storage.ObjectStore {
		if _, ok := s.(storage.RangeReader); ok {
			return s
		}
		return readViaGetRange{s}
	},
}}

// OptionalInterfaces names the interfaces a storage.ObjectStore may
// implement besides storage.ObjectStore, which the engines use when it
// does (storage.RangeReader: reads into pooled buffers). A store
// wrapper must implement each exactly when the store it wraps does;
// RunWrapper checks it.
func OptionalInterfaces() []string {
	names := make([]string, len(optionals))
	for i, o := range optionals {
		names[i] = o.name
	}
	return names
}

// bare is a store with none of the optional interfaces: only
// storage.ObjectStore's methods are promoted from the embedded field.
type bare struct{ storage.ObjectStore }

// readViaGetRange is a store given storage.RangeReader by way of its
// GetRange: a copy into dst before it returns, which keeps the contract.
type readViaGetRange struct{ storage.ObjectStore }

func (s readViaGetRange) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	if len(dst) == 0 {
		return 0, fmt.Errorf("storagetest: ReadRange %s [%d, +0): %w", ref, offset, storage.ErrInvalidRange)
	}
	b, err := s.GetRange(ctx, ref, offset, int64(len(dst)))
	if err != nil {
		return 0, err
	}
	return copy(dst, b), nil
}

// RunWrapper checks a store wrapper, middleware that takes a
// storage.ObjectStore and returns one that forwards to it (a meter, a
// fault injector, a cache). First, in subtest OptionalInterfaces, that
// wrap keeps the optional interfaces (OptionalInterfaces) of what it
// wraps: wrap(s) implements each exactly when s does, checked on a store
// of h with the interfaces and on one without (an interface the wrapper
// drops turns off what the engines do with it, with no error to say so;
// one it adds without the wrapped store's support answers for a store
// that cannot). Then, in subtest Store, Run's whole suite through
// wrapped stores of h given every optional interface, so that what the
// wrapper forwards, its optional methods included, keeps the contract.
func RunWrapper(t *testing.T, h Harness, wrap func(storage.ObjectStore) storage.ObjectStore, opts ...Option) {
	t.Helper()
	t.Run("OptionalInterfaces", func(t *testing.T) {
		local, _ := h.MakeStores(t.Context(), t)
		require.NotNil(t, local, "harness returned a nil local store")
		for _, o := range optionals {
			with, without := o.add(local), bare{local}
			assert.True(t, o.has(wrap(with)), "wrapping a store that implements %s (%T) gives %T, which does not: the engines lose what it does",
				o.name, with, wrap(with))
			assert.False(t, o.has(wrap(without)), "wrapping a store that does not implement %s (%T) gives %T, which does",
				o.name, without, wrap(without))
			assert.Equal(t, o.has(local), o.has(wrap(local)), "wrapping the harness's %T: %s", local, o.name)
		}
	})
	t.Run("Store", func(t *testing.T) {
		Run(t, HarnessFunc(func(ctx context.Context, t *testing.T) (storage.ObjectStore, storage.ObjectStore) {
			local, peer := h.MakeStores(ctx, t)
			require.NotNil(t, local, "harness returned a nil local store")
			require.NotNil(t, peer, "harness returned a nil peer store")
			for _, o := range optionals {
				local, peer = o.add(local), o.add(peer)
			}
			return wrap(local), wrap(peer)
		}), opts...)
	})
}
