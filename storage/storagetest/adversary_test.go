package storagetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/memtest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

// fwdMutant is a wrapper that keeps the optional interfaces (so subtest
// OptionalInterfaces passes) but forwards one thing wrong, as mode says.
type fwdMutant struct {
	storage.ObjectStore
	mode string
	mu   sync.Mutex
	buf  []byte // reused by mode "aliased"
}

type fwdMutantRange struct {
	*fwdMutant
	rr storage.RangeReader
}

func (m *fwdMutant) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	switch m.mode {
	case "get-error-stringified":
		b, err := m.ObjectStore.GetRange(ctx, ref, offset, length)
		if err != nil {
			return nil, fmt.Errorf("wrapper: %v", err) // %v: the kind is lost
		}
		return b, nil
	case "get-context-dropped":
		return m.ObjectStore.GetRange(context.WithoutCancel(ctx), ref, offset, length)
	case "get-aliased":
		b, err := m.ObjectStore.GetRange(ctx, ref, offset, length)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if cap(m.buf) < len(b) {
			m.buf = make([]byte, len(b))
		}
		m.buf = m.buf[:len(b)]
		copy(m.buf, b)
		return m.buf, nil
	case "get-error-as-unavailable":
		b, err := m.ObjectStore.GetRange(ctx, ref, offset, length)
		if err != nil {
			return nil, fmt.Errorf("wrapper: %w", storage.ErrUnavailable)
		}
		return b, nil
	}
	return m.ObjectStore.GetRange(ctx, ref, offset, length)
}

func (m *fwdMutant) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	ref, err := m.ObjectStore.Put(ctx, key, body)
	if m.mode == "put-error-dropped" && err != nil {
		return metadata.ObjectRef{AZ: m.Local().AZ, Bucket: m.Local().Bucket, Key: key}, nil
	}
	return ref, err
}

func (m *fwdMutant) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	if m.mode == "delete-first-only" && len(refs) > 1 {
		refs = refs[:1]
	}
	return m.ObjectStore.Delete(ctx, refs)
}

func (m *fwdMutant) List(ctx context.Context, bucket, prefix string) ([]storage.ObjectInfo, error) {
	if m.mode == "list-prefix-dropped" {
		prefix = ""
	}
	return m.ObjectStore.List(ctx, bucket, prefix)
}

func (m fwdMutantRange) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	n, err := m.rr.ReadRange(ctx, ref, offset, dst)
	switch {
	case m.mode == "readrange-error-swallowed" && err != nil:
		return len(dst), nil
	case m.mode == "readrange-error-stringified" && err != nil:
		return n, errors.New("wrapper: " + err.Error())
	case m.mode == "readrange-short" && err == nil && n > 0:
		return n - 1, nil
	}
	return n, err
}

func mutateForwarding(mode string) func(storage.ObjectStore) storage.ObjectStore {
	return func(s storage.ObjectStore) storage.ObjectStore {
		m := &fwdMutant{ObjectStore: s, mode: mode}
		if rr, ok := s.(storage.RangeReader); ok {
			return fwdMutantRange{m, rr}
		}
		return m
	}
}

var forwardingMutants = []string{
	"get-error-stringified", "get-context-dropped", "get-aliased", "get-error-as-unavailable",
	"put-error-dropped", "delete-first-only", "list-prefix-dropped",
	"readrange-error-swallowed", "readrange-error-stringified", "readrange-short",
}

const forwardingMutantEnv = "STORAGETEST_FORWARDING_MUTANT"

// Wrappers that keep the optional interfaces but forward a call wrong
// (an error's kind lost or changed, an error dropped, the context
// dropped, an answer aliased to a reused buffer, a Delete or List
// argument changed, a ReadRange count off by one): RunWrapper fails each
// in subtest Store. Each runs in a child process, since the check fails
// its t.
func TestAdversaryRunWrapperCatchesMisforwarding(t *testing.T) {
	if mode := os.Getenv(forwardingMutantEnv); mode != "" {
		storagetest.RunWrapper(t, memtest.Harness(), mutateForwarding(mode), storagetest.ManyKeys(5))
		return
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, mode := range forwardingMutants {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestAdversaryRunWrapperCatchesMisforwarding$", "-test.count=1")
			cmd.Env = append(os.Environ(), forwardingMutantEnv+"="+mode)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "RunWrapper passed a wrapper that forwards wrong:\n%s", out)
			require.Contains(t, string(out), "--- FAIL: TestAdversaryRunWrapperCatchesMisforwarding/Store", "%s", out)
			require.NotContains(t, string(out), "--- FAIL: TestAdversaryRunWrapperCatchesMisforwarding/OptionalInterfaces", "%s", out)
		})
	}
}
