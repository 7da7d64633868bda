package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sweepValues are what a shell can pass to a numeric flag, from the
// ordinary to the absurd: zero, negative, tiny, huge, not a number,
// infinite, the int64 and uint64 edges, beyond float64, hexadecimal.
var sweepValues = []string{
	"0", "-1", "1e-300", "1e300", "NaN", "Inf", "-Inf",
	"9223372036854775807", "-9223372036854775808", "18446744073709551616", "1e999", "0x10",
}

// kindValues are the extra values for a kind of flag.
var kindValues = map[string][]string{
	"duration": {"0s", "-1ns", "1ns", "2562047h47m16.854775807s", "2562048h", "1e300s"},
	"bytes":    {"1B", "0.4B", "9223372036854775807B", "4611686018427387904", "1e30GiB"},
}

// sweepFlags returns the numeric flags of fs and their values to sweep.
// A flag that is neither numeric nor of a known other kind fails the test:
// a new flag is swept as soon as it exists, or the test says why not.
func sweepFlags(t *testing.T, fs *flag.FlagSet) map[string][]string {
	t.Helper()
	numeric := numericFlags(fs)
	out := make(map[string][]string)
	fs.VisitAll(func(f *flag.Flag) {
		if slices.Contains(numeric, f.Name) {
			values := slices.Clone(sweepValues)
			switch v := f.Value.(type) {
			case *byteSize:
				values = append(values, kindValues["bytes"]...)
			case flag.Getter:
				if _, ok := v.Get().(time.Duration); ok {
					values = append(values, kindValues["duration"]...)
				}
			}
			out[f.Name] = values
			return
		}
		switch v := f.Value.(type) {
		case *bucketsFlag:
		case flag.Getter:
			switch v.Get().(type) {
			case string, bool:
			default:
				t.Errorf("flag --%s is of a kind this sweep does not know (%T): sweep it or say why not", f.Name, v.Get())
			}
		default:
			t.Errorf("flag --%s is of a kind this sweep does not know (%T): sweep it or say why not", f.Name, f.Value)
		}
	})
	return out
}

// wrongNumber finds, in a text report, a number no report should have:
// NaN, an infinity, negative money, or a negative count (which is what a
// wrapped integer looks like).
var wrongNumber = regexp.MustCompile(`NaN|Inf|\$-|-\$|(^|[\s(/=,])-[0-9]`)

// checkJSONNumbers fails for a negative value in a JSON report, but for the
// savings, which are negative when activetier costs more. NaN and
// infinities cannot be in JSON: the encoder fails, and the run with it.
func checkJSONNumbers(t *testing.T, v any, path string) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			checkJSONNumbers(t, e, path+"."+k)
		}
	case []any:
		for _, e := range x {
			checkJSONNumbers(t, e, path+"[]")
		}
	case float64:
		// Savings are negative where activetier costs more; what the Meter
		// did not see is cost_usd less the ledger's sum, which rounding may
		// leave a hair below zero.
		signed := []string{".savings_usd", ".savings_ratio", ".savings_ratio_uncompressed_baseline", ".unmetered_usd"}
		if !slices.ContainsFunc(signed, func(s string) bool { return strings.HasSuffix(path, s) }) {
			assert.False(t, x < 0 || math.IsNaN(x) || math.IsInf(x, 0), "%s = %v", path, x)
		}
	}
}

// checkUsageError checks a refusal: exit 2 before anything ran, one line
// naming the flag.
func checkUsageError(t *testing.T, r result, name string) {
	t.Helper()
	assert.Empty(t, r.stdout)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line on stderr: %q", r.stderr)
	assert.Contains(t, r.stderr, "-"+name, "the error names the flag")
}

// Every numeric flag of cost, at every value of the sweep, with and
// without --json: a correct report (exit 0, no NaN, infinity, negative
// money or wrapped count) or one line naming the flag (exit 2).
func TestCostFlagSweep(t *testing.T) {
	_, fs := costFlags()
	for name, values := range sweepFlags(t, fs) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, v := range values {
				for _, args := range [][]string{{"cost", "--plan", "--" + name, v}, {"cost", "--" + name, v}, {"cost", "--json", "--" + name, v}} {
					r := runBinary(binaryContext(t), t, nil, nil, args...)
					assert.NotContains(t, r.stderr, "panic", args)
					switch r.code {
					case exitUsage:
						checkUsageError(t, r.result, name)
					case exitOK:
						assert.Empty(t, r.stderr, args)
						if args[1] == "--json" {
							var rep map[string]any
							require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), args)
							checkJSONNumbers(t, rep, "")
						} else {
							assert.NotRegexp(t, wrongNumber, r.stdout, args)
						}
					default:
						t.Errorf("%v: exit %d, want 0 or 2: %s", args, r.code, r.stderr)
					}
				}
			}
		})
	}
}

// Every flag of cost at its largest accepted value at once, and at its
// smallest: the limits keep any combination finite.
func TestCostFlagExtremesTogether(t *testing.T) {
	maxima := []string{"cost", "--json", "--mb-per-sec", "1e9", "--partitions", "10000000", "--brokers", "100000", "--rf", "100000",
		"--interval", "1ns", "--object-bytes", "1", "--batch-bytes", "1", "--ranges-per-follower", "1e300",
		"--followers-per-object", "99999", "--retention", "2562047h47m16.854775807s", "--metadata-partitions", "10000000",
		"--put-per-1000", "1e6", "--get-per-1000", "1e6", "--upload-per-gb", "1e6", "--retrieval-per-gb", "1e6",
		"--storage-per-gb-month", "1e6", "--cross-az-per-gb", "1e6", "--cross-az-out-per-gb", "1e6", "--cross-az-in-per-gb", "1e6"}
	minima := []string{"cost", "--json", "--mb-per-sec", "0.000001", "--partitions", "1", "--brokers", "2", "--rf", "2",
		"--interval", "24h", "--object-bytes", "4611686018427387903", "--batch-bytes", "4611686018427387903",
		"--put-per-1000", "1e-300", "--get-per-1000", "0", "--upload-per-gb", "1e-300", "--retrieval-per-gb", "0",
		"--storage-per-gb-month", "1e-300", "--cross-az-per-gb", "1e-300", "--retention", "1ns"}
	for _, args := range [][]string{maxima, minima} {
		for _, extra := range [][]string{nil, {"--per", "second"}, {"--gib"}} {
			args := append(slices.Clone(args), extra...)
			r := runBinary(binaryContext(t), t, nil, nil, args...)
			require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
			var rep map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
			checkJSONNumbers(t, rep, "")
			text := runBinary(binaryContext(t), t, nil, nil, slices.Delete(slices.Clone(args), 1, 2)...)
			require.Equal(t, exitOK, text.code, text.stderr)
			assert.NotRegexp(t, wrongNumber, text.stdout)
		}
	}
}

// demoHeader starts the line a demo prints once its flags are valid and
// its cluster runs.
const demoHeader = "activetier demo: "

// runDemoSweep runs the built binary's demo with args. A run that passed
// validation (its header is out) and is still running a few seconds later
// (a --duration of centuries) is interrupted, as a user would.
func runDemoSweep(t *testing.T, args ...string) (r result, interrupted bool) {
	t.Helper()
	cmd := exec.CommandContext(binaryContext(t), binPath, args...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	require.NoError(t, cmd.Start())
	var out strings.Builder
	header := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if out.Len() == 0 && strings.HasPrefix(sc.Text(), demoHeader) {
				close(header)
			}
			out.WriteString(sc.Text() + "\n")
		}
	}()
	select {
	case <-header:
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			interrupted = true
			require.NoError(t, cmd.Process.Signal(os.Interrupt))
		}
	case <-done:
	}
	<-done
	err = cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return result{stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode()}, interrupted
}

// Every numeric flag of demo, at every value of the sweep, on a small short
// run: an invalid value fails at once (exit 2, one line naming the flag,
// nothing run); a valid one runs and reports no wrong number, or is
// interrupted cleanly when it would run for long.
func TestDemoFlagSweep(t *testing.T) {
	base := []string{"demo", "--partitions", "6", "--rate", "1", "--duration", "200ms", "--drain-timeout", "5s"}
	_, fs := demoFlags()
	ran := 0
	for name, values := range sweepFlags(t, fs) {
		t.Run(name, func(t *testing.T) {
			for _, v := range values {
				args := append(slices.Clone(base), "--"+name, v)
				r, interrupted := runDemoSweep(t, args...)
				assert.NotContains(t, r.stderr, "panic", args)
				switch {
				case r.code == exitUsage:
					checkUsageError(t, r, name)
					continue
				case interrupted:
					assert.Equal(t, exitInterrupted, r.code, "%v: %s", args, r.stderr)
					assert.Equal(t, "activetier demo: interrupted\n", r.stderr, args)
				case r.code == exitFailure:
					// A drain shorter than the flush interval may end
					// before followers catch up: the report says so.
					assert.Contains(t, r.stderr, "follower logs differ from their leader's", args)
					require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
				default:
					assert.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
					assert.Empty(t, r.stderr, args)
				}
				ran++
				assert.True(t, strings.HasPrefix(r.stdout, demoHeader), "%v: %s", args, r.stdout)
				assert.NotRegexp(t, wrongNumber, r.stdout, args)
			}
		})
	}
	assert.Positive(t, ran, "some values are valid")
}
