package demo

import (
	"regexp"
	"strings"
)

// wordOperators turn spelled-out operators into symbols ("12 times 7").
var wordOperators = strings.NewReplacer(
	" multiplied by ", " * ", " times ", " * ", " x ", " * ", "×", "*", "÷", "/",
	" divided by ", " / ", " over ", " / ", " plus ", " + ", " minus ", " - ",
	" to the power of ", " ^ ", "**", "^",
)

// exprRun is a run of characters that can form arithmetic.
var exprRun = regexp.MustCompile(`[-+(]*[0-9.]+(?:[\s()]*[-+*/%^][\s()]*[-+(]*[0-9.]+[)\s]*)+`)

// timeQuestion recognises questions about the time or the date.
var timeQuestion = regexp.MustCompile(`(?i)\b(what time|the time|time is it|current time|clock|what day|today|the date|current date|what date)\b`)

// arithmetic returns the arithmetic expression of a question ("What is
// 12*7?" → "12*7") and whether there is one. The expression is returned
// without spaces, with operators as symbols, and it always evaluates.
func arithmetic(text string) (string, bool) {
	t := wordOperators.Replace(" " + strings.ToLower(text) + " ")
	for _, m := range exprRun.FindAllString(t, -1) {
		expr := strings.Join(strings.Fields(m), "")
		expr = strings.TrimRight(expr, ".")
		if !strings.ContainsAny(strings.TrimLeft(expr, "-+("), "+-*/%^") {
			continue
		}
		if _, err := evaluate(expr); err == nil || err == errDivZero {
			return expr, true
		}
	}
	return "", false
}

// asksTime reports whether text asks for the time or the date.
func asksTime(text string) bool { return timeQuestion.MatchString(text) }

// greeting reports whether text is a bare greeting.
func greeting(text string) bool {
	t := strings.Trim(strings.ToLower(strings.TrimSpace(text)), "!.?, ")
	switch t {
	case "hi", "hello", "hey", "hello there", "hi there", "good morning", "good evening", "good afternoon", "howdy":
		return true
	}
	return false
}
