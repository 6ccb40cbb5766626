package tools

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// Eval evaluates an arithmetic expression: numbers, + - * / % ^ (power,
// right-associative), unary minus and parentheses. It never panics; errors
// name the position of the problem.
func Eval(expr string) (float64, error) {
	p := &parser{s: expr}
	p.skip()
	if p.pos >= len(p.s) {
		return 0, fmt.Errorf("empty expression")
	}
	v, err := p.sum()
	if err != nil {
		return 0, err
	}
	p.skip()
	if p.pos < len(p.s) {
		return 0, fmt.Errorf("unexpected %q at position %d", p.s[p.pos], p.pos+1)
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("the result is not a finite number")
	}
	return v, nil
}

// FormatNumber renders v without a trailing ".0" for integers.
func FormatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 12, 64)
}

type parser struct {
	s     string
	pos   int
	depth int
}

func (p *parser) skip() {
	for p.pos < len(p.s) && unicode.IsSpace(rune(p.s[p.pos])) {
		p.pos++
	}
}

func (p *parser) peek() byte {
	p.skip()
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *parser) sum() (float64, error) {
	v, err := p.product()
	if err != nil {
		return 0, err
	}
	for {
		switch p.peek() {
		case '+':
			p.pos++
			r, err := p.product()
			if err != nil {
				return 0, err
			}
			v += r
		case '-':
			p.pos++
			r, err := p.product()
			if err != nil {
				return 0, err
			}
			v -= r
		default:
			return v, nil
		}
	}
}

func (p *parser) product() (float64, error) {
	v, err := p.power()
	if err != nil {
		return 0, err
	}
	for {
		op := p.peek()
		if op != '*' && op != '/' && op != '%' && op != 'x' && op != 'X' {
			return v, nil
		}
		at := p.pos
		p.pos++
		r, err := p.power()
		if err != nil {
			return 0, err
		}
		switch op {
		case '*', 'x', 'X':
			v *= r
		case '/':
			if r == 0 {
				return 0, fmt.Errorf("division by zero at position %d", at+1)
			}
			v /= r
		case '%':
			if r == 0 {
				return 0, fmt.Errorf("modulo by zero at position %d", at+1)
			}
			v = math.Mod(v, r)
		}
	}
}

func (p *parser) power() (float64, error) {
	base, err := p.unary()
	if err != nil {
		return 0, err
	}
	if p.peek() == '^' || (p.peek() == '*' && p.pos+1 < len(p.s) && p.s[p.pos+1] == '*') {
		if p.s[p.pos] == '*' {
			p.pos += 2
		} else {
			p.pos++
		}
		exp, err := p.power()
		if err != nil {
			return 0, err
		}
		return math.Pow(base, exp), nil
	}
	return base, nil
}

func (p *parser) unary() (float64, error) {
	switch p.peek() {
	case '-':
		p.pos++
		v, err := p.unary()
		return -v, err
	case '+':
		p.pos++
		return p.unary()
	}
	return p.atom()
}

func (p *parser) atom() (float64, error) {
	c := p.peek()
	if c == '(' {
		p.depth++
		if p.depth > 100 {
			return 0, fmt.Errorf("expression nested too deeply")
		}
		p.pos++
		v, err := p.sum()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, fmt.Errorf("missing ')' at position %d", p.pos+1)
		}
		p.pos++
		p.depth--
		return v, nil
	}
	start := p.pos
	for p.pos < len(p.s) && (p.s[p.pos] >= '0' && p.s[p.pos] <= '9' || p.s[p.pos] == '.' || p.s[p.pos] == '_' || p.s[p.pos] == ',') {
		p.pos++
	}
	if start == p.pos {
		if p.pos >= len(p.s) {
			return 0, fmt.Errorf("expression ends early")
		}
		return 0, fmt.Errorf("unexpected %q at position %d", p.s[p.pos], p.pos+1)
	}
	num := strings.NewReplacer("_", "", ",", "").Replace(p.s[start:p.pos])
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q at position %d", p.s[start:p.pos], start+1)
	}
	return v, nil
}
