package costmodel

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// usd formats a dollar amount for a Reason: whole dollars with thousands
// separators from $1000, cents from $1, three significant digits below.
func usd(x float64) string {
	sign := ""
	if x < 0 {
		sign, x = "-", -x
	}
	switch {
	case x >= 1000:
		return sign + "$" + thousands(int64(math.Round(x)))
	case x >= 1:
		return sign + "$" + strconv.FormatFloat(x, 'f', 2, 64)
	default:
		return sign + "$" + strconv.FormatFloat(x, 'g', 3, 64)
	}
}

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

// decimalBytes formats a byte count in decimal units, like the prices.
func decimalBytes(x float64) string {
	for _, u := range []struct {
		div  float64
		name string
	}{{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "KB"}} {
		if x >= u.div {
			return fmt.Sprintf("%.3g %s", x/u.div, u.name)
		}
	}
	return fmt.Sprintf("%.3g B", x)
}

// rate formats a per-second count: three significant digits, or a whole
// number with thousands separators from 1000.
func rate(x float64) string {
	if x >= 1000 {
		return thousands(int64(math.Round(x)))
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}
