package storeutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzParseContentRange checks the Content-Range parser never panics and
// accepts only well-formed ranges, which it reads back exactly.
func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{
		"bytes 0-9/10", "bytes 5-14/100", "bytes 0-0/*", "bytes 9-5/10", "bytes -1-5/10",
		"bytes 0-9223372036854775807/9223372036854775807", "bytes 0-99999999999999999999/1",
		"bytes=0-9", "bytes 0-9", "", "bytes a-b/c", "bytes 0--1/5", "bytes 0-9/9",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		first, last, size, err := ParseContentRange(s)
		if err != nil {
			return
		}
		if first < 0 || last < first || size < -1 || size != -1 && size <= last {
			t.Fatalf("ParseContentRange(%q) = %d, %d, %d", s, first, last, size)
		}
		total := "*"
		if size >= 0 {
			total = fmt.Sprint(size)
		}
		if again, l2, s2, err := ParseContentRange(fmt.Sprintf("bytes %d-%d/%s", first, last, total)); err != nil || again != first || l2 != last || s2 != size {
			t.Fatalf("ParseContentRange(%q) does not read back: %v", s, err)
		}
	})
}

func TestParseContentRange(t *testing.T) {
	cases := []struct {
		in                string
		first, last, size int64
		ok                bool
	}{
		{"bytes 5-14/100", 5, 14, 100, true},
		{"bytes 0-0/*", 0, 0, -1, true},
		{"bytes 0-9/9", 0, 0, 0, false}, // the range ends past the size
		{"bytes 9-5/10", 0, 0, 0, false},
		{"bytes five-nine/ten", 0, 0, 0, false},
		{"bytes=0-9/10", 0, 0, 0, false},
	}
	for _, c := range cases {
		first, last, size, err := ParseContentRange(c.in)
		if !c.ok {
			assert.Error(t, err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, []int64{c.first, c.last, c.size}, []int64{first, last, size}, c.in)
	}
}

func TestHideContextErr(t *testing.T) {
	dns := &net.DNSError{Err: "timeout", Name: "example.invalid"}
	err := HideContextErr(fmt.Errorf("attempt: %w: %w", context.DeadlineExceeded, dns))
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "an attempt's deadline is not the caller's")
	var got *net.DNSError
	require.ErrorAs(t, err, &got, "everything else stays reachable")
	assert.Contains(t, err.Error(), "deadline exceeded")
	plain := errors.New("plain")
	assert.Same(t, plain, HideContextErr(plain))
}

func TestNeverSent(t *testing.T) {
	assert.True(t, NeverSent(&net.DNSError{Err: "no such host", IsNotFound: true}))
	assert.True(t, NeverSent(fmt.Errorf("x: %w", &net.OpError{Op: "dial", Err: errors.New("refused")})))
	assert.False(t, NeverSent(&net.OpError{Op: "read", Err: errors.New("reset")}), "a read failed after the request left")
	assert.False(t, NeverSent(errors.New("other")))
}

// FuzzControlChar checks ControlChar finds exactly the C0, DEL and C1
// characters of any string.
func FuzzControlChar(f *testing.F) {
	for _, s := range []string{"plain/key", "tab\tkey", "del\x7f", "c1\u0085", "\xff\xfe", "ключ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, ok := ControlChar(s)
		var want rune
		var wantOK bool
		for _, c := range s {
			if c < 0x20 || c == 0x7f || c >= 0x80 && c <= 0x9f {
				want, wantOK = c, true
				break
			}
		}
		if r != want || ok != wantOK {
			t.Fatalf("ControlChar(%q) = %U, %v; want %U, %v", s, r, ok, want, wantOK)
		}
		if ok && !utf8.ValidRune(r) {
			t.Fatalf("ControlChar(%q) returned an invalid rune", s)
		}
	})
}

func TestErrorTextAndKindAndCause(t *testing.T) {
	kind, cause := errors.New("kind"), errors.New("cause")
	for _, tc := range []struct {
		kind, cause error
		text        string
		n           int
	}{
		{kind, cause, "st: Put b/k: kind: cause", 2},
		{kind, nil, "st: Put b/k: kind", 1},
		{nil, cause, "st: Put b/k: cause", 1},
		{nil, nil, "st: Put b/k", 0},
	} {
		if got := ErrorText("st", "Put", "b", "k", tc.kind, tc.cause); got != tc.text {
			t.Errorf("ErrorText = %q, want %q", got, tc.text)
		}
		if got := KindAndCause(tc.kind, tc.cause); len(got) != tc.n {
			t.Errorf("KindAndCause(%v, %v) has %d errors, want %d", tc.kind, tc.cause, len(got), tc.n)
		}
	}
}
