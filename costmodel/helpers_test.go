package costmodel

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testRand returns a seeded source for property tests. The seed is logged;
// set COSTMODEL_SEED to replay a failure.
func testRand(t *testing.T) (*rand.Rand, uint64) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("COSTMODEL_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "COSTMODEL_SEED")
	}
	t.Logf("seed %d (replay with COSTMODEL_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0)), seed
}
