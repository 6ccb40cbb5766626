package demo

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limits of the arithmetic the demo model recognises.
const (
	maxExprLen   = 200
	maxExprDepth = 32
)

var errDivZero = errors.New("division by zero")

// evaluate computes an arithmetic expression of numbers, + - * / % ^ and
// parentheses (^ binds tightest and is right-associative; unary minus is
// allowed). It is how the demo model checks that text is arithmetic, and
// how it answers when no calculator tool is offered.
func evaluate(expr string) (float64, error) {
	if len(expr) > maxExprLen {
		return 0, fmt.Errorf("expression longer than %d characters", maxExprLen)
	}
	p := &exprParser{s: expr}
	v, err := p.expr(0)
	if err != nil {
		return 0, err
	}
	p.space()
	if p.i < len(p.s) {
		return 0, fmt.Errorf("unexpected %q at %d", p.s[p.i], p.i)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("the result is not a finite number")
	}
	return v, nil
}

// formatNumber renders a result without a trailing ".0" and without
// floating-point noise.
func formatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 12, 64)
}

type exprParser struct {
	s string
	i int
}

func (p *exprParser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *exprParser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *exprParser) expr(depth int) (float64, error) {
	v, err := p.term(depth)
	if err != nil {
		return 0, err
	}
	for {
		switch op := p.peek(); op {
		case '+', '-':
			p.i++
			r, err := p.term(depth)
			if err != nil {
				return 0, err
			}
			if op == '+' {
				v += r
			} else {
				v -= r
			}
		default:
			return v, nil
		}
	}
}

func (p *exprParser) term(depth int) (float64, error) {
	v, err := p.power(depth)
	if err != nil {
		return 0, err
	}
	for {
		switch op := p.peek(); op {
		case '*', '/', '%':
			p.i++
			r, err := p.power(depth)
			if err != nil {
				return 0, err
			}
			switch {
			case op == '*':
				v *= r
			case r == 0:
				return 0, errDivZero
			case op == '/':
				v /= r
			default:
				v = math.Mod(v, r)
			}
		default:
			return v, nil
		}
	}
}

func (p *exprParser) power(depth int) (float64, error) {
	base, err := p.unary(depth)
	if err != nil {
		return 0, err
	}
	if p.peek() != '^' {
		return base, nil
	}
	p.i++
	if depth >= maxExprDepth {
		return 0, errors.New("expression nested too deeply")
	}
	exp, err := p.power(depth + 1)
	if err != nil {
		return 0, err
	}
	return math.Pow(base, exp), nil
}

func (p *exprParser) unary(depth int) (float64, error) {
	if depth >= maxExprDepth {
		return 0, errors.New("expression nested too deeply")
	}
	switch p.peek() {
	case '-':
		p.i++
		v, err := p.unary(depth + 1)
		return -v, err
	case '+':
		p.i++
		return p.unary(depth + 1)
	case '(':
		p.i++
		v, err := p.expr(depth + 1)
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, errors.New("missing )")
		}
		p.i++
		return v, nil
	}
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.') {
		p.i++
	}
	if start == p.i {
		if p.i < len(p.s) {
			return 0, fmt.Errorf("unexpected %q at %d", p.s[p.i], p.i)
		}
		return 0, errors.New("unexpected end of expression")
	}
	return strconv.ParseFloat(strings.TrimSpace(p.s[start:p.i]), 64)
}
