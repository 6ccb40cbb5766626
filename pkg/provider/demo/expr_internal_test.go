package demo

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEvaluate(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		"12*7": "84", "(3+4)*2": "14", "2^10": "1024", "2^3^2": "512", "-3+2": "-1",
		"10/4": "2.5", "7%3": "1", "1.5*4": "6", "--2": "2", "0.1+0.2": "0.3",
	} {
		v, err := evaluate(expr)
		require.NoError(t, err, expr)
		require.Equal(t, want, formatNumber(v), expr)
	}
	for _, bad := range []string{"", "1+", "(1", "1/0", "2*x", "1 2"} {
		_, err := evaluate(bad)
		require.Error(t, err, bad)
	}
}

func TestArithmetic(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"What is 42?", "hello", "version 1.2", "call me at 5"} {
		_, ok := arithmetic(q)
		require.False(t, ok, q)
	}
}

// FuzzArithmetic checks that recognising arithmetic never panics and that
// what it returns always evaluates (or divides by zero).
func FuzzArithmetic(f *testing.F) {
	for _, s := range []string{"What is 12*7?", "(((1)))+2", "2^3^4^5", "-(-(-1))", "1/0", "what is 1e9*1e9", "9.9.9+1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		expr, ok := arithmetic(s)
		if !ok {
			return
		}
		if _, err := evaluate(expr); err != nil && err != errDivZero {
			t.Fatalf("arithmetic(%q) = %q, which does not evaluate: %v", s, expr, err)
		}
	})
}
