package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/learn"
)

// advice is one (scope, kind) of `tollgate advise`, its -json line. Token
// figures are per call, from the calls the store learned (recent calls
// weigh more); quantiles err high by less than 9 %.
type advice struct {
	Scope    string  `json:"scope"`
	Kind     string  `json:"kind"`
	Provider string  `json:"provider"`
	Calls    float64 `json:"calls"` // decayed count of calls learned
	// Output quantiles, reasoning included.
	OutputP50  float64 `json:"output_p50"`
	OutputP99  float64 `json:"output_p99"`
	OutputP999 float64 `json:"output_p999"`
	// MaxTokens is the mean max_tokens sent; Input the mean prompt.
	MaxTokens float64 `json:"max_tokens"`
	Input     float64 `json:"input"`
	// On OpenAI accounting (input + max_tokens charged at admission, never
	// refunded): tokens reserved per call, tokens a max_tokens at the
	// p99.9 output would reserve, and their ratio.
	Reserved  float64 `json:"openai_reserved"`
	Needed    float64 `json:"openai_needed"`
	TPMFactor float64 `json:"tpm_factor"`
	// InputRatioP95 is the scope's p95 of actual over estimated input
	// (0 if no call's input was an estimate).
	InputRatioP95 float64 `json:"input_ratio_p95,omitempty"`
}

// adviseReport is the -json output of `tollgate advise`.
type adviseReport struct {
	At     time.Time `json:"at"`
	Source source    `json:"source"`
	// Advice is one entry per scope and kind, by scope key then kind.
	Advice []advice `json:"advice"`
	// Empty, if set, says why Advice is empty: nothing learned under the
	// prefix.
	Empty string `json:"empty,omitempty"`
}

const adviseUsage = `usage: tollgate advise [flags]

Shows, per scope and kind of call (the activity type, or the call's
UsageKey), what the calls learned by every worker on the Redis store
produced against the max_tokens they sent: output p50, p99 and p99.9, the
mean max_tokens and input, and what oversizing max_tokens costs on OpenAI's
accounting, which charges input + max_tokens against tokens per minute at
admission and refunds no unused output:

  max_tokens 8192, p99.9 output 410: 6.4× the TPM needed

(reserved input + max_tokens over input + the p99.9 output). On OpenAI, a
lower max_tokens admits that many times more calls per minute; Anthropic
already reserves the learned p95 and settles to actual use, so there
max_tokens costs no throughput. The workers learn from every call that
settles with usage (interceptor.Options.Learning); recent calls weigh more,
and a kind unused for 7 days is forgotten. Quantiles err high by less
than 9 %. A store with nothing learned under -prefix exits 3.

examples:
  tollgate advise -redis 10.0.0.5:6379
  tollgate advise -json | jq '.advice[] | select(.tpm_factor > 2)'

flags:
`

func advise(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("advise", adviseUsage, stderr, true)
	var rf redisFlags
	rf.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object (adviseReport: at, source, advice, empty) instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tollgate advise: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	ctx, cancel := context.WithTimeout(ctx, rf.timeout)
	defer cancel()
	store, release, err := rf.open(ctx)
	if err != nil {
		return err
	}
	defer release()
	rep := adviseReport{At: time.Now(), Source: rf.source(), Advice: []advice{}}
	scopes, err := store.LearnedScopes(ctx)
	if err != nil {
		return err
	}
	for _, sc := range scopes {
		kinds, err := store.LearnedKinds(ctx, sc)
		if err != nil {
			return fmt.Errorf("kinds of %s: %w", sc.Key(), err)
		}
		for _, kind := range kinds {
			l, err := store.Learned(ctx, sc, kind)
			if err != nil {
				return fmt.Errorf("learned of %s %s: %w", sc.Key(), kind, err)
			}
			if l.Calls() > 0 {
				rep.Advice = append(rep.Advice, adviceOf(sc, kind, l))
			}
		}
	}
	var empty error
	if len(rep.Advice) == 0 {
		e := rf.empty(ctx, "nothing learned", "workers learn from calls that settle with usage "+
			"(interceptor.Options.Learning, on unless disabled) and forget a kind unused for 7 days")
		rep.Empty, empty = e.reason, e
	}
	if *asJSON {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
		return empty
	}
	if empty != nil {
		return empty
	}
	return printAdvice(stdout, rep.Advice)
}

// adviceOf sums up what kind learned on sc.
func adviceOf(sc capacity.Scope, kind string, l learn.Learned) advice {
	q := func(h learn.Histogram, p float64) float64 {
		v, _ := h.Quantile(p)
		return math.Ceil(v)
	}
	a := advice{Scope: sc.Key(), Kind: kind, Provider: string(sc.Provider), Calls: l.Calls(),
		OutputP50: q(l.Output, 0.5), OutputP99: q(l.Output, 0.99), OutputP999: q(l.Output, 0.999),
		MaxTokens: math.Round(l.MaxTokens.Mean()), Input: math.Round(l.Input.Mean())}
	a.Reserved = a.Input + a.MaxTokens
	a.Needed = a.Input + min(a.OutputP999, max(a.MaxTokens, 1)) // no call outputs past its max_tokens
	if a.Needed > 0 {
		a.TPMFactor = math.Round(a.Reserved/a.Needed*10) / 10
	}
	if l.InputRatio.Count() > 0 {
		r, _ := l.InputRatio.Quantile(0.95)
		a.InputRatioP95 = math.Round(r*100) / 100
	}
	return a
}

// summary is the line of advice on a: what max_tokens costs.
func (a advice) summary() string {
	if a.MaxTokens <= 0 {
		return "no max_tokens sent"
	}
	s := fmt.Sprintf("max_tokens %.0f, p99.9 output %.0f: %.1f× the TPM needed", a.MaxTokens, a.OutputP999, a.TPMFactor)
	switch capacity.Provider(a.Provider) {
	case capacity.OpenAI:
		return s
	case capacity.Anthropic:
		return s + " on OpenAI accounting; anthropic reserves the learned p95 and settles to actual use"
	case capacity.Gemini:
		return s + " on OpenAI accounting; gemini meters no output per minute"
	}
	return s + " on OpenAI accounting"
}

func printAdvice(w io.Writer, lines []advice) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tKIND\tCALLS\tOUTPUT p50/p99/p99.9\tMAX_TOKENS\tINPUT\tINPUT RATIO p95\tADVICE")
	for _, a := range lines {
		ratio := "-"
		if a.InputRatioP95 > 0 {
			ratio = fmt.Sprintf("%.2f", a.InputRatioP95)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f/%.0f/%.0f\t%.0f\t%.0f\t%s\t%s\n", a.Scope, a.Kind, a.Calls,
			a.OutputP50, a.OutputP99, a.OutputP999, a.MaxTokens, a.Input, ratio, a.summary())
	}
	return tw.Flush()
}
