// Package backoff is the one retry-delay formula the engines and their
// protocol cores share: exponential growth with full jitter, as in the
// AWS Architecture Blog's "Exponential Backoff And Jitter". It imports
// only the standard library, so the cores can use it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Delay returns the wait before retry number attempt (0-based): uniformly
// random in [0, min(max, initial*2^attempt)], so retrying clients spread
// out. rng is the caller's, for reproducible runs.
func Delay(rng *rand.Rand, initial, max time.Duration, attempt int) time.Duration {
	ceil := initial
	for i := 0; i < attempt && ceil < max; i++ {
		ceil *= 2
	}
	ceil = min(ceil, max)
	return time.Duration(rng.Int64N(int64(ceil) + 1))
}
