package compaction

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
)

// Defaults of [Config].
const (
	DefaultCompactAt           = 0.85
	DefaultCompactTo           = 0.60
	DefaultReserveOutputTokens = 16384
	DefaultImageTokens         = 1600
	// FileTokens is the flat estimate of one file part.
	FileTokens = 2000
)

// None, given to a count or size field whose zero value means "the
// default", asks for zero instead (for example Offload{KeepLast: None}
// keeps no recent result verbatim).
const None = -1

// Amount is a watermark: a fraction of the usable window or an absolute
// number of tokens. The zero Amount means "the default". Build one with
// [Fraction] or [Tokens]; in JSON and text it is a number, read as a
// fraction when it is at most 1 and as tokens when it is a larger integer
// ("0.85", "85%" and "120000" all parse).
type Amount struct {
	fraction float64
	tokens   int
}

// Fraction is the share f of the usable window (0 < f ≤ 1).
func Fraction(f float64) Amount { return Amount{fraction: f} }

// Tokens is an absolute count of n tokens (n ≥ 1), capped at the usable
// window when the budget is computed.
func Tokens(n int) Amount { return Amount{tokens: n} }

// IsZero reports whether a is unset.
func (a Amount) IsZero() bool { return a.fraction == 0 && a.tokens == 0 }

// Fraction returns the fraction and true when a is one.
func (a Amount) Fraction() (float64, bool) { return a.fraction, a.fraction != 0 }

// Tokens returns the token count and true when a is one.
func (a Amount) Tokens() (int, bool) { return a.tokens, a.tokens != 0 }

// Of resolves a against a usable window of usable tokens.
func (a Amount) Of(usable int) int {
	if a.tokens != 0 {
		return min(a.tokens, usable)
	}
	return int(a.fraction * float64(usable))
}

// String renders a as "85%" or "120000 tokens".
func (a Amount) String() string {
	switch {
	case a.tokens != 0:
		return strconv.Itoa(a.tokens) + " tokens"
	case a.fraction != 0:
		return strconv.FormatFloat(a.fraction*100, 'f', -1, 64) + "%"
	}
	return "default"
}

func (a Amount) validate(field string) error {
	switch {
	case a.tokens < 0:
		return fmt.Errorf("%w: %s: %d tokens is negative", ErrInvalidConfig, field, a.tokens)
	case a.tokens == 0 && (a.fraction < 0 || a.fraction > 1 || math.IsNaN(a.fraction)):
		return fmt.Errorf("%w: %s: fraction %v is outside (0, 1]", ErrInvalidConfig, field, a.fraction)
	}
	return nil
}

// ParseAmount parses "0.85", "85%" or "120000".
func ParseAmount(s string) (Amount, error) {
	t := strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || f <= 0 || f > 100 {
			return Amount{}, fmt.Errorf("%w: watermark %q: want a percentage in (0, 100]", ErrInvalidConfig, s)
		}
		return Fraction(f / 100), nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) {
		return Amount{}, fmt.Errorf("%w: watermark %q: want a fraction in (0, 1] or a token count", ErrInvalidConfig, s)
	}
	if f <= 1 {
		return Fraction(f), nil
	}
	if f != math.Trunc(f) || f > math.MaxInt32 {
		return Amount{}, fmt.Errorf("%w: watermark %q: a token count must be a whole number", ErrInvalidConfig, s)
	}
	return Tokens(int(f)), nil
}

// MarshalText implements encoding.TextMarshaler ("0.85" or "120000").
func (a Amount) MarshalText() ([]byte, error) {
	if a.tokens != 0 {
		return []byte(strconv.Itoa(a.tokens)), nil
	}
	return []byte(strconv.FormatFloat(a.fraction, 'f', -1, 64)), nil
}

// UnmarshalText implements encoding.TextUnmarshaler (see [ParseAmount]).
func (a *Amount) UnmarshalText(b []byte) error {
	v, err := ParseAmount(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// MarshalJSON writes a as a JSON number.
func (a Amount) MarshalJSON() ([]byte, error) { return a.MarshalText() }

// UnmarshalJSON reads a JSON number or string (see [ParseAmount]).
func (a *Amount) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return a.UnmarshalText([]byte(s))
	}
	return a.UnmarshalText(b)
}

// Config configures a [Compaction]. The zero value is lovia's default
// policy: window asked of the provider, watermarks 85% / 60%, the three
// stages, the LLM summarizer on the run's provider, no result store.
type Config struct {
	// ContextWindow is the model's context window in tokens. 0 asks the
	// provider once per endpoint and model (loop.ContextWindowDiscoverer);
	// when it cannot tell, the policy only compacts reactively, after the
	// endpoint rejected a prompt as too long. A window an overflow error
	// named caps this value downward.
	ContextWindow int
	// CompactAt is the trigger: compaction starts when the view's estimate
	// reaches it (default Fraction(0.85) of the usable window).
	CompactAt Amount
	// CompactTo is the target compaction shrinks the view to (default
	// Fraction(0.60)); it must be below CompactAt. The gap between the two
	// is the hysteresis that keeps the rendered prefix stable for turns.
	CompactTo Amount
	// KeepRecentTokens is the size of the protected tail that no stage
	// touches (0: a fifth of the usable window).
	KeepRecentTokens int
	// ReserveOutputTokens is kept free for the answer: usable window =
	// ContextWindow − ReserveOutputTokens (0: 16384; None: no reserve).
	ReserveOutputTokens int
	// Stages run in order, cheapest first, until the view fits the target
	// (nil: Offload{}, Clear{}, Summarize{}).
	Stages []Stage
	// Summarizer condenses old history for the Summarize stage (nil: an
	// LLMSummarizer on the run's own provider).
	Summarizer Summarizer
	// ImageTokens is the flat estimate of one image part (0: 1600).
	ImageTokens int
	// Store archives offloaded tool outputs under their content digest so
	// recall_tool_result can return them from any worker (nil: recall reads
	// the transcript, which keeps every full output anyway).
	Store ResultStore
	// Logger receives warnings: store failures, summarizer failures, a
	// protected tail that covers everything (nil: discarded).
	Logger *slog.Logger
}

// WithDefaults returns c with every unset field at its documented default.
func (c Config) WithDefaults() Config {
	if c.CompactAt.IsZero() {
		c.CompactAt = Fraction(DefaultCompactAt)
	}
	if c.CompactTo.IsZero() {
		c.CompactTo = Fraction(DefaultCompactTo)
	}
	switch {
	case c.ReserveOutputTokens == 0:
		c.ReserveOutputTokens = DefaultReserveOutputTokens
	case c.ReserveOutputTokens == None:
		c.ReserveOutputTokens = 0
	}
	if c.Stages == nil {
		c.Stages = []Stage{Offload{}, Clear{}, Summarize{}}
	}
	if c.Summarizer == nil {
		c.Summarizer = &LLMSummarizer{}
	}
	if c.ImageTokens == 0 {
		c.ImageTokens = DefaultImageTokens
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Validate reports the first invalid field of c (after defaults), naming
// it. New panics on what Validate rejects.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.ContextWindow < 0:
		return fmt.Errorf("%w: ContextWindow %d is negative", ErrInvalidConfig, c.ContextWindow)
	case c.KeepRecentTokens < 0:
		return fmt.Errorf("%w: KeepRecentTokens %d is negative", ErrInvalidConfig, c.KeepRecentTokens)
	case c.ReserveOutputTokens < 0:
		return fmt.Errorf("%w: ReserveOutputTokens %d is negative (use None for no reserve)", ErrInvalidConfig, c.ReserveOutputTokens)
	case c.ImageTokens < 0:
		return fmt.Errorf("%w: ImageTokens %d is negative", ErrInvalidConfig, c.ImageTokens)
	}
	if err := c.CompactAt.validate("CompactAt"); err != nil {
		return err
	}
	if err := c.CompactTo.validate("CompactTo"); err != nil {
		return err
	}
	at, atFrac := c.CompactAt.Fraction()
	to, toFrac := c.CompactTo.Fraction()
	if atFrac && toFrac && to >= at {
		return fmt.Errorf("%w: CompactTo %s must be below CompactAt %s", ErrInvalidConfig, c.CompactTo, c.CompactAt)
	}
	atTok, atIsTok := c.CompactAt.Tokens()
	toTok, toIsTok := c.CompactTo.Tokens()
	if atIsTok && toIsTok && toTok >= atTok {
		return fmt.Errorf("%w: CompactTo %s must be below CompactAt %s", ErrInvalidConfig, c.CompactTo, c.CompactAt)
	}
	seen := map[string]bool{}
	for i, s := range c.Stages {
		if s == nil {
			return fmt.Errorf("%w: Stages[%d] is nil", ErrInvalidConfig, i)
		}
		if seen[s.Name()] {
			return fmt.Errorf("%w: Stages[%d]: a second stage named %q", ErrInvalidConfig, i, s.Name())
		}
		seen[s.Name()] = true
	}
	return nil
}
