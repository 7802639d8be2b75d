package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// Workload shapes of the batch and the interactive stream.
const (
	minWords, maxWords         = 200, 3000 // batch prompt length, Pareto with wordsTail
	wordsTail                  = 1.2
	minMaxTokens, maxMaxTokens = 64, 1024 // batch max_tokens, log-uniform
	interactiveWords           = 40       // interactive prompt length, ± a quarter
	interactiveMaxTokens       = 128
	// outputMedian and outputSigma shape the answers: a fraction of
	// max_tokens drawn log-normal (median 15 %), clamped to [1, max_tokens].
	outputMedian = 0.15
	outputSigma  = 0.9
	// meanOutputFraction is the mean of that fraction, clamp included
	// (numerically, for outputMedian and outputSigma above): the plan's
	// expectation of the output tokens.
	meanOutputFraction = 0.215
)

// Kind says which part of the workload a call belongs to.
type Kind uint64

// Kinds of calls.
const (
	Batch Kind = iota
	Interactive
)

// Workload is the seeded workload of a run: Calls batch calls, all
// submitted at once, and an interactive call every Every while the batch
// drains. The same Workload always yields the same calls.
type Workload struct {
	Seed  uint64
	Calls int
	Every time.Duration
}

// Call is one model call of the workload.
type Call struct {
	Prompt    string
	MaxTokens int64
}

// Call returns call i of kind k: a pure function of the seed, so workflows
// build their calls themselves and replay them identically.
func (w Workload) Call(k Kind, i int) Call {
	rng := rand.New(rand.NewPCG(w.Seed, uint64(k)<<32|uint64(i)))
	if k == Interactive {
		words := interactiveWords*3/4 + rng.IntN(interactiveWords/2+1)
		return Call{Prompt: prompt(rng, fmt.Sprintf("Question %d.", i), words), MaxTokens: interactiveMaxTokens}
	}
	// Pareto: most prompts short, a long tail up to maxWords.
	words := min(maxWords, int(minWords/math.Pow(1-rng.Float64(), 1/wordsTail)))
	maxTokens := int64(math.Round(minMaxTokens * math.Pow(maxMaxTokens/minMaxTokens, rng.Float64())))
	return Call{Prompt: prompt(rng, fmt.Sprintf("Summarize document %d.", i), words), MaxTokens: maxTokens}
}

// InputTokens is the call's prompt as the fake provider counts it (one user
// message). Every strategy is given this exact count, so none loses to a
// tokenizer's error.
func (c Call) InputTokens() int64 { return testsuite.PromptTokens(c.Prompt) }

// vocabulary words are three letters, so a word and its space count as one
// token (testsuite.CountTokens: four bytes a token).
var vocabulary = strings.Fields("the cat sat and ran far off yet now our new old big red box lid top end way day")

// prompt returns a title and words words drawn from rng.
func prompt(rng *rand.Rand, title string, words int) string {
	var b strings.Builder
	b.WriteString(title)
	for range words {
		b.WriteByte(' ')
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
	}
	return b.String()
}

// Output returns the fake provider's OutputFunc for the workload: each
// answer is a log-normal fraction of its max_tokens (median outputMedian),
// drawn from the seed and the request body, so heavy-tailed and well below
// max_tokens for most calls.
func Output(seed uint64) testsuite.OutputFunc {
	return func(c testsuite.Call) int64 {
		rng := rand.New(rand.NewPCG(seed, c.Hash))
		frac := outputMedian * math.Exp(outputSigma*rng.NormFloat64())
		return min(c.MaxTokens, max(1, int64(frac*float64(c.MaxTokens))))
	}
}

// Latency is the fake provider's answer time: 50 ms plus 0.25 ms an output token.
func Latency(_ testsuite.Call, output int64) time.Duration {
	return 50*time.Millisecond + time.Duration(output)*250*time.Microsecond
}

// Demand is a workload's expected totals, for planning limits.
type Demand struct {
	Requests, Input, MaxTokens, Output float64
}

// Expect returns the expected demand of the batch and of the interactive
// calls made over target.
func (w Workload) Expect(target time.Duration) Demand {
	var d Demand
	add := func(c Call) {
		d.Requests++
		d.Input += float64(c.InputTokens())
		d.MaxTokens += float64(c.MaxTokens)
		d.Output += meanOutputFraction * float64(c.MaxTokens)
	}
	for i := range w.Calls {
		add(w.Call(Batch, i))
	}
	if w.Every > 0 {
		for i := range int(target / w.Every) {
			add(w.Call(Interactive, i))
		}
	}
	return d
}
