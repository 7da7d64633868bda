package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bench command on a tiny grid: one row per cell, in grid order, each
// a whole demo run that ended consistent.
func TestBenchJSON(t *testing.T) {
	r := runCmd(t, "", "bench", "--json", "--partitions", "6,12", "--rates", "1,2", "--duration", "400ms", "--seed", "3")
	require.Equal(t, exitOK, r.code, "stderr: %s\nstdout: %s", r.stderr, r.stdout)
	var res benchResult
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&res), r.stdout)
	assert.Positive(t, res.Machine.CPUs)
	assert.NotEmpty(t, res.Machine.GoVersion)
	assert.InDelta(t, 0.4, res.DurationS, 1e-9)
	require.Len(t, res.Rows, 4)
	for i, want := range []struct {
		partitions int
		rate       float64
	}{{6, 1}, {6, 2}, {12, 1}, {12, 2}} {
		row := res.Rows[i]
		assert.Equal(t, want.partitions, row.Partitions, "row %d", i)
		assert.Equal(t, want.rate, row.RateMBPerSec, "row %d", i)
		assert.True(t, row.Consistent, "row %d", i)
		assert.Positive(t, row.ProducedMBPerSec, "row %d", i)
		assert.Positive(t, row.ReplicatedMBPerSec, "row %d", i)
		assert.Positive(t, row.LagP50MS, "row %d", i)
		assert.GreaterOrEqual(t, row.LagP99MS, row.LagP50MS, "row %d", i)
		assert.Positive(t, row.MetadataPerProduced, "row %d", i)
		assert.Less(t, row.MetadataPerProduced, 1.0, "row %d", i)
		shares := row.EnginesShare + row.CodecShare + row.ObjectStoreShare + row.LocalLogShare + row.DemoShare
		assert.LessOrEqual(t, shares, 1+1e-9, "row %d: parts of the profiled CPU", i)
		assert.GreaterOrEqual(t, row.FloorSPerGB, 0.0, "row %d", i)
		if res.Machine.OS == "linux" {
			assert.Positive(t, row.CPUSecondsPerGB, "row %d", i)
			assert.Positive(t, row.PeakRSSBytes, "row %d", i)
		}
	}
}

func TestBenchText(t *testing.T) {
	r := runCmd(t, "", "bench", "--partitions", "4", "--rates", "1", "--duration", "300ms")
	require.Equal(t, exitOK, r.code, "stderr: %s\nstdout: %s", r.stderr, r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4, r.stdout) // machine, blank, header, one row
	assert.Contains(t, lines[0], "CPUs")
	assert.Contains(t, lines[2], "lag p99 ms")
	assert.Equal(t, []string{"4", "1"}, strings.Fields(lines[3])[:2])
	for _, col := range []string{"engines %", "codec %", "store %", "local logs %", "demo %", "engines s/GB", "floor s/GB", "× floor"} {
		assert.Contains(t, lines[2], col)
	}
	row := strings.Fields(lines[3])
	assert.Len(t, row, 18, "a value for every column")
	assert.Equal(t, "yes", row[len(row)-1])
	assert.Contains(t, r.stderr, "bench: 4 partitions at 1 MB/s")
}

func TestBenchUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--partitions", "0"}, `--partitions 0: "0" is not a positive number`},
		{[]string{"--partitions", "10,x"}, `"x" is not a positive number`},
		{[]string{"--rates", ""}, `--rates : "" is not a positive number`},
		{[]string{"--partitions", "200000"}, "--partitions 200000: must be between 1 and 100000"},
		{[]string{"--duration", "0s"}, "--duration 0s: must be positive"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCmd(t, "", append([]string{"bench"}, tc.args...)...)
			assert.Equal(t, exitUsage, r.code, "stderr: %s", r.stderr)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
}

// --cpuprofile and --memprofile write gzipped pprof profiles, on the demo
// and on bench; a file that cannot be created is an error before the run.
func TestProfileFlags(t *testing.T) {
	for _, cmd := range [][]string{
		{"demo", "--json", "--partitions", "4", "--rate", "1", "--duration", "300ms"},
		{"bench", "--json", "--partitions", "4", "--rates", "1", "--duration", "300ms"},
	} {
		t.Run(cmd[0], func(t *testing.T) {
			dir := t.TempDir()
			cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
			r := runCmd(t, "", append(cmd, "--cpuprofile", cpu, "--memprofile", mem)...)
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			for _, f := range []string{cpu, mem} {
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				require.Greater(t, len(b), 2)
				assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "%s is gzipped, as pprof writes", f)
			}
			r = runCmd(t, "", append(cmd, "--cpuprofile", filepath.Join(dir, "missing", "cpu.pprof"))...)
			assert.Equal(t, exitFailure, r.code)
			assert.Contains(t, r.stderr, "--cpuprofile: open")
		})
	}
}
