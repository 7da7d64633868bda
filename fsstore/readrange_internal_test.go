package fsstore

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHandoffStopsAtAbandon: once the caller abandons a read, the read
// copies nothing more into the caller's buffer and is told to stop.
func TestHandoffStopsAtAbandon(t *testing.T) {
	h := &handoff{dst: make([]byte, 6)}
	assert.True(t, h.deliver(0, []byte("abc")))
	h.abandon()
	assert.False(t, h.deliver(3, []byte("def")), "a delivery after abandon must be refused")
	assert.Equal(t, []byte{'a', 'b', 'c', 0, 0, 0}, h.dst)
}
