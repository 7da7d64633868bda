package leadcore

import (
	"time"

	"github.com/activetier/activetier/internal/hedge"
)

// hedging hedges uploads at their p90 within 10–200 ms, one in a row and
// a tenth of one per upload.
func hedging(c *Config) {
	c.Hedge = hedge.Policy{Quantile: 0.9, Min: 10 * time.Millisecond, Max: 200 * time.Millisecond, Budget: 0.1, Burst: 1}
	c.MaxInflight = 4
}
