package walstoretest_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/memtest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
	"github.com/activetier/activetier/walstore/walstoretest"
)

// Wrappers, each forwarding every call unchanged.

// hiding embeds the interface, so only ObjectStore's methods are
// promoted: the mistake of every wrapper written the obvious way.
type hiding struct{ walstore.ObjectStore }

// always is a RangeReader whatever it wraps, answering ReadRange with
// GetRange and a copy.
type always struct{ walstore.ObjectStore }

func (a always) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	b, err := a.GetRange(ctx, ref, offset, int64(len(dst)))
	return copy(dst, b), err
}

// keeping is a RangeReader exactly when what it wraps is.
type keeping struct{ walstore.ObjectStore }

type keepingRange struct {
	keeping
	rr walstore.RangeReader
}

func (k keepingRange) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	return k.rr.ReadRange(ctx, ref, offset, dst)
}

func keep(s walstore.ObjectStore) walstore.ObjectStore {
	if rr, ok := s.(walstore.RangeReader); ok {
		return keepingRange{keeping{s}, rr}
	}
	return keeping{s}
}

var wrappers = map[string]func(walstore.ObjectStore) walstore.ObjectStore{
	"hiding": func(s walstore.ObjectStore) walstore.ObjectStore { return hiding{s} },
	"always": func(s walstore.ObjectStore) walstore.ObjectStore { return always{s} },
}

const wrapperEnv = "WALSTORETEST_WRAPPER_MUTANT"

// A wrapper that keeps the optional interfaces passes the whole check.
func TestRunWrapper(t *testing.T) {
	require.Equal(t, []string{"walstore.RangeReader"}, walstoretest.OptionalInterfaces())
	walstoretest.RunWrapper(t, memtest.Harness(), keep, walstoretest.ManyKeys(50))
}

// TestRunWrapperCatchesBrokenWrappers runs the check on wrappers that
// drop or add an optional interface, in a child process since the check
// fails its t, and checks that subtest OptionalInterfaces fails.
func TestRunWrapperCatchesBrokenWrappers(t *testing.T) {
	if name := os.Getenv(wrapperEnv); name != "" {
		wrap, ok := wrappers[name]
		require.True(t, ok, "no broken wrapper named %q", name)
		walstoretest.RunWrapper(t, memtest.Harness(), wrap)
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
