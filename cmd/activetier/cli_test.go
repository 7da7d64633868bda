package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every mistake on the command line is one line on stderr naming what was
// wrong, and exit code 2; nothing is printed on stdout.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the one line on stderr
	}{
		{[]string{"frobnicate"}, `unknown subcommand "frobnicate"`},
		{[]string{"help", "frobnicate"}, `unknown subcommand "frobnicate"`},
		{[]string{"help", "cost", "demo"}, "at most one subcommand"},
		{[]string{"cost", "--bogus"}, "-bogus"},
		{[]string{"cost", "--mb-per-sec", "-5"}, "--mb-per-sec -5: must be a throughput between 0.000001 and 1000000000 MB/s"},
		{[]string{"cost", "--mb-per-sec", "1e10"}, "--mb-per-sec 1e+10: must be a throughput between"},
		{[]string{"cost", "--mb-per-sec", "NaN"}, "--mb-per-sec NaN: must be a throughput"},
		{[]string{"cost", "--mb-per-sec", "fast"}, `invalid value "fast" for flag -mb-per-sec`},
		{[]string{"cost", "--partitions", "0"}, "--partitions 0: must be between 1 and 10000000"},
		{[]string{"cost", "--brokers", "100001"}, "--brokers 100001: must be at most 100000"},
		{[]string{"cost", "--metadata-partitions", "10000001"}, "--metadata-partitions 10000001: must be at most 10000000"},
		{[]string{"cost", "--rf", "4"}, "--rf 4: must be at most --brokers (3)"},
		{[]string{"cost", "--brokers", "2"}, "--rf 3: must be at most --brokers (2)"},
		{[]string{"cost", "--rf", "1"}, "--rf 1: must be at least 2"},
		{[]string{"cost", "--leaders", "9"}, "--leaders 9:"},
		{[]string{"cost", "--interval", "0s"}, "--interval 0s: must be positive"},
		{[]string{"cost", "--interval", "-1s"}, "--interval -1s"},
		{[]string{"cost", "--object-bytes", "-1"}, `invalid value "-1" for flag -object-bytes: must not be negative`},
		{[]string{"cost", "--object-bytes", "4 parsecs"}, `invalid value "4 parsecs" for flag -object-bytes`},
		{[]string{"cost", "--followers-per-object", "9"}, "--followers-per-object 9:"},
		{[]string{"cost", "--retention", "-1h"}, "--retention -1h0m0s: must not be negative"},
		{[]string{"cost", "--preset", "glacier"}, "--preset glacier: unknown price list (want filesystem, s3express, s3express-2025, s3standard, s3standard-2025)"},
		{[]string{"cost", "--put-per-1000", "-0.1"}, "--put-per-1000 -0.1: must be a finite price between 0 and 1000000"},
		{[]string{"cost", "--cross-az-in-per-gb", "1e300"}, "--cross-az-in-per-gb 1e+300: must be a finite price between 0 and 1000000"},
		{[]string{"cost", "--cross-az-per-gb", "Inf"}, "--cross-az-per-gb +Inf: must be a finite price"},
		{[]string{"cost", "--per", "fortnight"}, "--per fortnight: want second, hour, day or month"},
		{[]string{"cost", "--plan", "--latency-budget", "0s"}, "--latency-budget 0s: must be positive"},
		{[]string{"cost", "month"}, `unexpected argument "month"`},
		{[]string{"inspect"}, "want one object"},
		{[]string{"inspect", "a", "b"}, "got 2 arguments"},
		{[]string{"inspect", "--s3-endpoint", "http://127.0.0.1:1", "key"}, "--s3-endpoint http://127.0.0.1:1: needs --bucket"},
		{[]string{"inspect", "--bucket", "b", "--s3-endpoint", "127.0.0.1:9000", "key"}, "--s3-endpoint 127.0.0.1:9000: want a URL"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCmd(t, "", tc.args...)
			assert.Equal(t, exitUsage, r.code)
			assert.Empty(t, r.stdout)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line on stderr, got %q", r.stderr)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
}

// With no subcommand at all the user needs the list of them, not one line.
func TestNoSubcommand(t *testing.T) {
	r := runCmd(t, "")
	assert.Equal(t, exitUsage, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "usage: activetier <subcommand>")
	assert.Contains(t, r.stderr, "inspect")
}

func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "usage: activetier <subcommand>"},
		{[]string{"--help"}, "usage: activetier <subcommand>"},
		{[]string{"help", "cost"}, "-mb-per-sec"},
		{[]string{"cost", "-h"}, "-latency-budget"},
		{[]string{"help", "inspect"}, "-s3-endpoint"},
		{[]string{"inspect", "--help"}, "-bucket"},
		{[]string{"help", "demo"}, "-fail-az"},
		{[]string{"demo", "-h"}, "-duration"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCmd(t, "", tc.args...)
			assert.Equal(t, exitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, tc.want)
			assert.Empty(t, r.stderr)
		})
	}
}

func TestInterruptedBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut strings.Builder
	code := run(ctx, []string{"demo", "--duration", "1s", "--partitions", "3"}, strings.NewReader(""), &out, &errOut)
	assert.Equal(t, exitInterrupted, code)
	assert.Equal(t, "activetier demo: interrupted\n", errOut.String())
}
