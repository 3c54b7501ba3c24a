package llm

import (
	"fmt"
	"strings"
)

// Price is what a model costs, in nano-USD per token (10⁻⁹ USD; $3 per
// million tokens is 3000), so costs add up exactly.
type Price struct {
	Input  int64 `json:"input_nano_usd_per_token"`
	Output int64 `json:"output_nano_usd_per_token"`
}

// perMillion converts USD per million tokens to a Price.
func perMillion(in, out float64) Price {
	return Price{Input: int64(in*1000 + 0.5), Output: int64(out*1000 + 0.5)}
}

// Prices are the list prices (USD per million input/output tokens,
// standard tier, no caching or batch discount) of the models a run is
// likely to name. A model with a dated suffix ("claude-sonnet-4-5-20250929",
// "gpt-5-mini-2025-08-07") takes its family's price. Check them against the
// providers' pricing pages before quoting a cost; a model not listed has an
// unknown cost, never zero.
var Prices = map[string]Price{
	// Anthropic
	"claude-opus-4-1":   perMillion(15, 75),
	"claude-opus-4":     perMillion(15, 75),
	"claude-opus-4-5":   perMillion(5, 25),
	"claude-sonnet-4":   perMillion(3, 15),
	"claude-sonnet-4-5": perMillion(3, 15),
	"claude-haiku-4-5":  perMillion(1, 5),
	"claude-3-5-haiku":  perMillion(0.8, 4),
	// OpenAI
	"gpt-5":        perMillion(1.25, 10),
	"gpt-5-mini":   perMillion(0.25, 2),
	"gpt-5-nano":   perMillion(0.05, 0.4),
	"gpt-4.1":      perMillion(2, 8),
	"gpt-4.1-mini": perMillion(0.4, 1.6),
	"gpt-4.1-nano": perMillion(0.1, 0.4),
	"gpt-4o":       perMillion(2.5, 10),
	"gpt-4o-mini":  perMillion(0.15, 0.6),
	// Google
	"gemini-2.5-pro":        perMillion(1.25, 10),
	"gemini-2.5-flash":      perMillion(0.3, 2.5),
	"gemini-2.5-flash-lite": perMillion(0.1, 0.4),
	"gemini-2.0-flash":      perMillion(0.1, 0.4),
}

// DefaultModels are the models a run uses when it names none.
var DefaultModels = map[string]string{
	Anthropic: "claude-sonnet-4-5",
	OpenAI:    "gpt-5-mini",
	Google:    "gemini-2.5-flash",
}

// PriceOf returns the price of a model: an exact entry, else the longest
// entry the model extends with a dated or versioned suffix ("-2025…",
// "-001", "-latest").
func PriceOf(model string) (Price, bool) {
	if p, ok := Prices[model]; ok {
		return p, true
	}
	best, found := "", false
	for name := range Prices {
		rest, ok := strings.CutPrefix(model, name+"-")
		if !ok || rest == "" {
			continue
		}
		if (rest[0] >= '0' && rest[0] <= '9') || rest == "latest" {
			if len(name) > len(best) {
				best, found = name, true
			}
		}
	}
	if !found {
		return Price{}, false
	}
	return Prices[best], true
}

// Cost is an estimated cost. Known is false for a model with no price.
type Cost struct {
	NanoUSD int64 `json:"nano_usd"`
	Known   bool  `json:"known"`
}

// CostOf estimates what usage cost on model.
func CostOf(model string, u Usage) Cost {
	p, ok := PriceOf(model)
	if !ok {
		return Cost{}
	}
	return Cost{NanoUSD: u.InputTokens*p.Input + u.OutputTokens*p.Output, Known: true}
}

// USD is the cost in dollars, for display.
func (c Cost) USD() float64 { return float64(c.NanoUSD) / 1e9 }

func (c Cost) String() string {
	if !c.Known {
		return "unknown"
	}
	return fmt.Sprintf("$%.4f", c.USD())
}

// Budget bounds the tokens a run may spend. It is plain data: a workflow
// keeps it in its state and charges each turn's usage.
type Budget struct {
	// Limit is the most tokens (input plus output) the run may use; 0
	// means no limit.
	Limit int64 `json:"limit"`
	Used  int64 `json:"used"`
}

// Charge adds a turn's usage.
func (b *Budget) Charge(u Usage) { b.Used += u.Total() }

// Remaining is what is left (-1 when there is no limit).
func (b Budget) Remaining() int64 {
	if b.Limit <= 0 {
		return -1
	}
	return max(b.Limit-b.Used, 0)
}

// Exhausted reports whether the budget is spent.
func (b Budget) Exhausted() bool { return b.Limit > 0 && b.Used >= b.Limit }

// Check returns a KindLimit error when the budget is spent, so a run stops
// cleanly before its next turn.
func (b Budget) Check() error {
	if b.Exhausted() {
		return &Error{Kind: KindLimit, Message: fmt.Sprintf("token budget spent: %d of %d tokens used", b.Used, b.Limit)}
	}
	return nil
}

// MaxTokens is the output limit for the next turn: perTurn, lowered to
// what the budget has left.
func (b Budget) MaxTokens(perTurn int) int {
	r := b.Remaining()
	if r < 0 || int64(perTurn) <= r {
		return perTurn
	}
	return int(r)
}
