package costmodel

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalid is matched (errors.Is) by every error reporting a bad input
// field; errors.As with *FieldError gives the field.
var ErrInvalid = errors.New("costmodel: invalid input")

// ErrNoBreakEven is returned by the break-even searches when the savings do
// not change sign anywhere in the searched range; the wrapping error says
// which way they stay and why.
var ErrNoBreakEven = errors.New("costmodel: no break-even point")

// FieldError names an input field whose value the model cannot use. Several
// are joined with errors.Join when more than one field is wrong.
type FieldError struct {
	// Field is the qualified field name, e.g. "Workload.RF".
	Field string
	// Value is the rejected value as given.
	Value any
	// Problem says what a valid value looks like.
	Problem string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("costmodel: %s = %v: %s", e.Field, e.Value, e.Problem)
}

// Unwrap makes every FieldError match ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// checker collects field errors so one call reports every bad field.
type checker struct{ errs []error }

func (c *checker) fail(field string, value any, problem string) {
	c.errs = append(c.errs, &FieldError{Field: field, Value: value, Problem: problem})
}

func (c *checker) err() error { return errors.Join(c.errs...) }

func (c *checker) finite(field string, v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		c.fail(field, v, "must be a finite number")
		return false
	}
	return true
}

func (c *checker) nonNegative(field string, v float64) {
	if c.finite(field, v) && v < 0 {
		c.fail(field, v, "must not be negative")
	}
}

func (c *checker) positive(field string, v float64) {
	if c.finite(field, v) && v <= 0 {
		c.fail(field, v, "must be positive")
	}
}

func (c *checker) nonNegativeDuration(field string, d time.Duration) {
	if d < 0 {
		c.fail(field, d, "must not be negative")
	}
}
