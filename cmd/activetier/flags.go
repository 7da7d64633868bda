package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// usageError is a mistake on the command line: an unknown subcommand or
// flag, or a value the command cannot use. It exits with code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// flagError names a flag, the value it was given and what is wrong with it.
func flagError(fs *flag.FlagSet, name, problem string) error {
	value := ""
	if f := fs.Lookup(name); f != nil {
		value = " " + f.Value.String()
	}
	return usagef("--%s%s: %s", name, value, problem)
}

// newFlagSet returns a FlagSet that reports nothing itself: parseFlags turns
// its errors into one line, and help goes to stdout.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args into fs. It returns help true when -h or --help was
// asked for, after writing the flags to e.stdout.
func parseFlags(e env, fs *flag.FlagSet, synopsis string, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeFlags(e.stdout, synopsis, fs)
			return true, nil
		}
		return false, &usageError{msg: err.Error()}
	}
	return false, nil
}

// noArgs rejects positional arguments for subcommands that take none; a
// stray word is usually a flag written without its dashes.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (flags are written --name value)", fs.Arg(0))
	}
	return nil
}

func writeFlags(w io.Writer, synopsis string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: activetier %s\n\nflags:\n", synopsis)
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// Limits of a throughput flag (MB/s): one byte a second, below which it
// would print as 0 B/s, to a petabyte a second.
const (
	minMBPerSec = 1e-6
	maxMBPerSec = 1e9
)

// checkMBPerSec checks the throughput flag name.
func checkMBPerSec(fs *flag.FlagSet, name string, v float64) error {
	if math.IsNaN(v) || v < minMBPerSec || v > maxMBPerSec {
		return flagError(fs, name, fmt.Sprintf("must be a throughput between %s and %s MB/s",
			strconv.FormatFloat(minMBPerSec, 'f', -1, 64), strconv.FormatFloat(maxMBPerSec, 'f', -1, 64)))
	}
	return nil
}

// byteSize is a flag value in bytes, written as a plain number or with a
// decimal (KB, MB, GB) or binary (KiB, MiB, GiB) unit.
type byteSize int64

func (b *byteSize) String() string { return formatBytes(int64(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
	}
	num, mult := strings.TrimSpace(s), 1.0
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("want a byte count such as 4194304, 4MiB or 1.5MB")
	}
	v *= mult
	if v < 0 {
		return 0, errors.New("must not be negative")
	}
	if v > math.MaxInt64/2 {
		return 0, errors.New("too large")
	}
	return int64(math.Round(v)), nil
}

// formatBytes writes n in the largest binary unit that divides it exactly,
// so that a default prints as it would be typed.
func formatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// humanBytes formats a byte count in decimal units for reports, matching
// the per-GB prices, with three significant digits (12.3 MB, 123 MB).
func humanBytes(x float64) string {
	for _, u := range []struct {
		div  float64
		name string
	}{{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "KB"}} {
		if math.Abs(x) >= u.div {
			return sigFigs(x/u.div) + " " + u.name
		}
	}
	return strconv.FormatFloat(x, 'f', 0, 64) + " B"
}

// sigFigs writes x with three significant digits and no exponent, rounding
// first so that 99.96 becomes "100", not "100.0".
func sigFigs(x float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64)
	decimals := 2
	switch a := math.Abs(r); {
	case a >= 100:
		decimals = 0
	case a >= 10:
		decimals = 1
	}
	return strconv.FormatFloat(r, 'f', decimals, 64)
}

// usd formats a dollar amount with three significant digits: cents from a
// dollar, plain decimals down to a tenth of a cent, and below that the
// exponent notation small figures are usually written in ($2.09e-6); whole
// dollars with separators from $1,000, and exponents again from 10^18.
func usd(x float64) string {
	sign := ""
	if x < 0 {
		sign, x = "-", -x
	}
	switch {
	case x == 0:
		return "$0"
	case x >= maxThousands:
		return sign + "$" + strings.Replace(strconv.FormatFloat(x, 'e', 2, 64), "e+", "e", 1)
	case x >= 1000:
		return sign + "$" + thousands(int64(math.Round(x)))
	case x >= 1:
		return sign + "$" + strconv.FormatFloat(x, 'f', 2, 64)
	case x >= 0.001:
		return sign + "$" + strconv.FormatFloat(x, 'g', 3, 64)
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(x, 'e', 2, 64), "e")
	e, _ := strconv.Atoi(exp)
	return sign + "$" + mant + "e" + strconv.Itoa(e)
}

// maxThousands is where amounts stop being written in full with
// thousands separators ($1,000,000,000,000,000), and an int64 is still far.
const maxThousands = 1e18

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
