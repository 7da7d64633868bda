package storagetest_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/memtest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

// Wrappers, each forwarding every call unchanged.

// hiding embeds the interface, so only ObjectStore's methods are
// promoted: the mistake of every wrapper written the obvious way.
type hiding struct{ storage.ObjectStore }

// always is a RangeReader whatever it wraps, answering ReadRange with
// GetRange and a copy.
type always struct{ storage.ObjectStore }

func (a always) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	b, err := a.GetRange(ctx, ref, offset, int64(len(dst)))
	return copy(dst, b), err
}

// keeping is a RangeReader exactly when what it wraps is.
type keeping struct{ storage.ObjectStore }

type keepingRange struct {
	keeping
	rr storage.RangeReader
}

func (k keepingRange) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	return k.rr.ReadRange(ctx, ref, offset, dst)
}

func keep(s storage.ObjectStore) storage.ObjectStore {
	if rr, ok := s.(storage.RangeReader); ok {
		return keepingRange{keeping{s}, rr}
	}
	return keeping{s}
}

var wrappers = map[string]func(storage.ObjectStore) storage.ObjectStore{
	"hiding": func(s storage.ObjectStore) storage.ObjectStore { return hiding{s} },
	"always": func(s storage.ObjectStore) storage.ObjectStore { return always{s} },
}

const wrapperEnv = "STORAGETEST_WRAPPER_MUTANT"

// A wrapper that keeps the optional interfaces passes the whole check.
func TestRunWrapper(t *testing.T) {
	require.Equal(t, []string{"storage.RangeReader"}, storagetest.OptionalInterfaces())
	storagetest.RunWrapper(t, memtest.Harness(), keep, storagetest.ManyKeys(50))
}

// TestRunWrapperCatchesBrokenWrappers runs the check on wrappers that
// drop or add an optional interface, in a child process since the check
// fails its t, and checks that subtest OptionalInterfaces fails.
func TestRunWrapperCatchesBrokenWrappers(t *testing.T) {
	if name := os.Getenv(wrapperEnv); name != "" {
		wrap, ok := wrappers[name]
		require.True(t, ok, "no broken wrapper named %q", name)
		storagetest.RunWrapper(t, memtest.Harness(), wrap)
		return
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	for name := range wrappers {
		t.Run(name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestRunWrapperCatchesBrokenWrappers$/^OptionalInterfaces$", "-test.count=1")
			cmd.Env = append(os.Environ(), wrapperEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the check passed a wrapper that breaks it:\n%s", out)
			require.Contains(t, string(out), "--- FAIL: TestRunWrapperCatchesBrokenWrappers/OptionalInterfaces", "%s", out)
		})
	}
}
