package memstore

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/activetier/activetier/faults"
)

// Latency is the lognormal latency distribution of one kind of request.
// A request moving n bytes has median Median + PerMiB·n/MiB, and its
// latency is that median times e^(Sigma·Z) for a standard normal Z. The
// noise scales the whole request, size-dependent part included: a request
// that is slow to start is a slow connection, slow throughout. The zero
// Latency is no latency at all.
type Latency struct {
	// Median is the median latency of a request moving no payload.
	Median time.Duration
	// PerMiB is added to the median for every MiB of payload.
	PerMiB time.Duration
	// Sigma is the standard deviation of the latency's natural log.
	Sigma float64
}

func (l Latency) validate(field string) error {
	switch {
	case l.Median < 0:
		return fmt.Errorf("%s.Median %v is negative", field, l.Median)
	case l.PerMiB < 0:
		return fmt.Errorf("%s.PerMiB %v is negative", field, l.PerMiB)
	case l.Sigma < 0 || math.IsNaN(l.Sigma) || math.IsInf(l.Sigma, 0):
		return fmt.Errorf("%s.Sigma %v must be finite and not negative", field, l.Sigma)
	}
	return nil
}

// sample draws one latency for a request moving size bytes, given a
// standard normal draw z.
func (l Latency) sample(size int64, z float64) time.Duration {
	median := float64(l.Median) + float64(l.PerMiB)*float64(size)/(1<<20)
	if median <= 0 {
		return 0
	}
	d := median * math.Exp(l.Sigma*z)
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// Profile is a latency model for every kind of request, plus the extra
// round trip of a request to a bucket in another AZ. The zero Profile is
// the "none" profile: every request completes without waiting.
type Profile struct {
	// Name identifies the profile in flags and reports.
	Name                   string
	Get, Put, Delete, List Latency
	// CrossAZMin and CrossAZMax bound the uniformly distributed time added
	// to a request whose bucket is in another AZ than the store making it.
	CrossAZMin, CrossAZMax time.Duration
}

// Validate reports the first field of p that cannot describe a latency.
func (p Profile) Validate() error {
	for _, f := range []struct {
		name string
		l    Latency
	}{{"Get", p.Get}, {"Put", p.Put}, {"Delete", p.Delete}, {"List", p.List}} {
		if err := f.l.validate("Profile." + f.name); err != nil {
			return fmt.Errorf("memstore: profile %q: %w", p.Name, err)
		}
	}
	if p.CrossAZMin < 0 || p.CrossAZMax < p.CrossAZMin {
		return fmt.Errorf("memstore: profile %q: Profile.CrossAZMin %v and CrossAZMax %v must satisfy 0 <= min <= max",
			p.Name, p.CrossAZMin, p.CrossAZMax)
	}
	return nil
}

func (p Profile) latency(op faults.Op) Latency {
	switch op {
	case faults.OpGetRange, faults.OpReadRange:
		return p.Get
	case faults.OpPut:
		return p.Put
	case faults.OpDelete:
		return p.Delete
	case faults.OpList:
		return p.List
	}
	return Latency{}
}

// zero reports whether p never makes a request wait.
func (p Profile) zero() bool {
	return p.Get == (Latency{}) && p.Put == (Latency{}) && p.Delete == (Latency{}) &&
		p.List == (Latency{}) && p.CrossAZMax == 0
}

// profiles returns the named profiles. Their numbers are the latency fits
// of docs/design.md, "Reference prices and latencies". The measurements give
// no figures for DELETE and LIST, nor a transfer rate for S3 Express GETs;
// the profiles assume a DELETE costs a
// PUT's base, a LIST page a GET's, and an S3 Express GET streams at the rate
// of its PUT (10 ms per MiB, about 100 MB/s).
func profiles() []Profile {
	const ms = time.Millisecond
	crossMin, crossMax := 500*time.Microsecond, 1500*time.Microsecond
	// S3 Standard streams a GET at about 90 MB/s: 2^20 B / (90e6 B/s).
	standardGetPerMiB := time.Second * (1 << 20) / 90_000_000
	return []Profile{
		{Name: "none"},
		{
			Name:       "s3express",
			Get:        Latency{Median: 2500 * time.Microsecond, PerMiB: 10 * ms, Sigma: 0.57},
			Put:        Latency{Median: 6500 * time.Microsecond, PerMiB: 10 * ms, Sigma: 0.24},
			Delete:     Latency{Median: 6500 * time.Microsecond, Sigma: 0.24},
			List:       Latency{Median: 2500 * time.Microsecond, Sigma: 0.57},
			CrossAZMin: crossMin,
			CrossAZMax: crossMax,
		},
		{
			Name:       "s3standard",
			Get:        Latency{Median: 27 * ms, PerMiB: standardGetPerMiB, Sigma: 0.62},
			Put:        Latency{Median: 60 * ms, PerMiB: 20 * ms, Sigma: 0.29},
			Delete:     Latency{Median: 60 * ms, Sigma: 0.29},
			List:       Latency{Median: 27 * ms, Sigma: 0.62},
			CrossAZMin: crossMin,
			CrossAZMax: crossMax,
		},
	}
}

// ProfileNames lists the names ParseProfile accepts.
func ProfileNames() []string {
	var names []string
	for _, p := range profiles() {
		names = append(names, p.Name)
	}
	return names
}

// ErrUnknownProfile is returned by ParseProfile for a name it does not know.
var ErrUnknownProfile = errors.New("memstore: unknown latency profile")

// ParseProfile returns the named latency profile: "none" (no latency, the
// default for unit tests), "s3express" or "s3standard".
func ParseProfile(name string) (Profile, error) {
	for _, p := range profiles() {
		if p.Name == name {
			return p, nil
		}
	}
	return Profile{}, fmt.Errorf("%w %q (want one of %s)", ErrUnknownProfile, name, strings.Join(ProfileNames(), ", "))
}
