package faults

import (
	"fmt"
	"slices"
	"time"
)

// Effect is what an Injector does to one operation. The zero Effect
// changes nothing.
type Effect struct {
	// Delay is added to the operation's latency, before it runs.
	Delay time.Duration
	// Err fails the operation: the wrapper returns an *Error wrapping it,
	// so errors.Is(err, Err) holds. Use storage.ErrUnavailable for a
	// transient object-store failure.
	Err error
	// AfterApply makes Err come after the operation took effect, as when
	// a response is lost on its way back: the object was stored or
	// deleted, yet the caller sees an error. Without Err it does nothing.
	AfterApply bool
	// Corrupt, when nonzero, changes one byte of what a read returns (see
	// CorruptBytes). Operations that return no bytes ignore it.
	Corrupt uint64
}

// Zero reports whether e changes nothing.
func (e Effect) Zero() bool { return e == Effect{} }

// And returns e and f applied together: their delays add up, e's error
// wins over f's, and e's corruption over f's.
func (e Effect) And(f Effect) Effect {
	e.Delay += f.Delay
	if e.Err == nil {
		e.Err, e.AfterApply = f.Err, f.AfterApply
	}
	if e.Corrupt == 0 {
		e.Corrupt = f.Corrupt
	}
	return e
}

// Before returns the error that fails req before it runs, or nil.
func (e Effect) Before(req Request) error {
	if e.Err == nil || e.AfterApply {
		return nil
	}
	return &Error{Request: kept(req), Err: e.Err}
}

// After returns the error that fails req after it took effect, or nil.
func (e Effect) After(req Request) error {
	if e.Err == nil || !e.AfterApply {
		return nil
	}
	return &Error{Request: kept(req), AfterApply: true, Err: e.Err}
}

// kept is req as an Error keeps it: without the caller's body, which a
// store must not retain, and with its own copy of the refs.
func kept(req Request) Request {
	req.Body = nil
	req.Refs = slices.Clone(req.Refs)
	return req
}

// CorruptBytes changes one byte of b in place, as e.Corrupt says: the
// byte at Corrupt modulo len(b) is XORed with a nonzero value drawn from
// Corrupt's high bits, so exactly one byte differs. It does nothing to an
// empty b or when Corrupt is zero.
func (e Effect) CorruptBytes(b []byte) {
	if e.Corrupt == 0 || len(b) == 0 {
		return
	}
	b[e.Corrupt%uint64(len(b))] ^= byte(1 + (e.Corrupt>>32)%255)
}

// Error is a failure an Injector caused. It wraps the Effect's error.
type Error struct {
	// Request is the operation that failed, without a Put's body.
	Request Request
	// AfterApply says the operation took effect before it failed.
	AfterApply bool
	// Err is the injected error.
	Err error
}

func (e *Error) Error() string {
	if e.AfterApply {
		return fmt.Sprintf("faults: %s: injected fault after it took effect: %v", e.Request, e.Err)
	}
	return fmt.Sprintf("faults: %s: injected fault: %v", e.Request, e.Err)
}

// Unwrap returns the injected error.
func (e *Error) Unwrap() error { return e.Err }
