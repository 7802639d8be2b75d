package main

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// Call shapes. A bulk call's prompt is Pareto distributed (most short, a long
// tail) and its max_tokens log-normal, both capped, so the largest call
// (maxInput + maxMaxTokens) is an eighth of the provider's 5 s bucket
// (Plan). Interactive calls are small and alike.
const (
	minInput, maxInput       = 300, 6000 // bulk prompt tokens, Pareto with inputTail
	inputTail                = 1.2
	medianMaxTokens          = 300 // bulk max_tokens, log-normal with maxTokensSigma
	maxTokensSigma           = 0.9
	minMaxTokens             = 16
	maxMaxTokens             = 3000
	interactiveInput         = 400 // interactive prompt tokens, ± a quarter
	interactiveMaxTokens     = 256
	outputMedian, outputSpan = 0.3, 0.6 // answers: a log-normal fraction of max_tokens
)

// LargestCall is the largest call the workload can make, in the tokens the
// provider charges (prompt + max_tokens, its message overhead included).
const LargestCall = maxInput + maxMaxTokens

// Interactive is the interactive stream's tenant name (its calls' tag
// prefix); the stream has no fairness key of its own.
const Interactive = "interactive"

// Workload is the seeded source of every call: the same Seed always yields
// the same calls, so workflows build their calls themselves (Call) and
// replay them identically.
type Workload struct {
	Seed uint64
}

// Call is one model call of the workload.
type Call struct {
	Prompt    string
	MaxTokens int64
}

// Call returns call i of tenant.
func (w Workload) Call(tenant string, i int) Call {
	h := fnv.New64a()
	_, _ = h.Write([]byte(tenant))
	rng := rand.New(rand.NewPCG(w.Seed^h.Sum64(), uint64(i)))
	title := fmt.Sprintf("Request %d of %s.", i, tenant)
	if tenant == Interactive {
		input := interactiveInput*3/4 + rng.IntN(interactiveInput/2+1)
		return Call{Prompt: prompt(rng, title, input), MaxTokens: interactiveMaxTokens}
	}
	input := min(maxInput, int(minInput/math.Pow(1-rng.Float64(), 1/inputTail)))
	maxTokens := int64(math.Round(medianMaxTokens * math.Exp(maxTokensSigma*rng.NormFloat64())))
	maxTokens = min(maxMaxTokens, max(minMaxTokens, maxTokens))
	return Call{Prompt: prompt(rng, title, input), MaxTokens: maxTokens}
}

// InputTokens is the prompt as the fake provider counts it (one user
// message); the gate is given this exact count.
func (c Call) InputTokens() int64 { return testsuite.PromptTokens(c.Prompt) }

// Cost is what the provider charges the call: OpenAI's prompt + max_tokens.
func (c Call) Cost() int64 { return c.InputTokens() + c.MaxTokens }

// Backlog returns how many calls of tenant it takes to reach tokens, and
// what they cost in all.
func (w Workload) Backlog(tenant string, tokens int64) (calls int, cost int64) {
	for cost < tokens {
		cost += w.Call(tenant, calls).Cost()
		calls++
	}
	return calls, cost
}

// vocabulary words are three letters, so a word and its space count as one
// token (testsuite.CountTokens: four bytes a token).
var vocabulary = strings.Fields("the cat sat and ran far off yet now our new old big red box lid top end way day")

// prompt returns a title and words drawn from rng, tokens prompt tokens in
// all as the fake provider counts a single message (PromptTokens).
func prompt(rng *rand.Rand, title string, tokens int) string {
	words := tokens - testsuite.MessageOverhead - int(testsuite.CountTokens(title))
	var b strings.Builder
	b.Grow(len(title) + 4*max(words, 0))
	b.WriteString(title)
	for range words {
		b.WriteByte(' ')
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
	}
	return b.String()
}

// Output returns the fake provider's OutputFunc: each answer a log-normal
// fraction of its max_tokens, drawn from the seed and the request body.
// (OpenAI charges max_tokens, so answers shape only the latency.)
func Output(seed uint64) testsuite.OutputFunc {
	return func(c testsuite.Call) int64 {
		rng := rand.New(rand.NewPCG(seed, c.Hash))
		frac := outputMedian * math.Exp(outputSpan*rng.NormFloat64())
		return min(c.MaxTokens, max(1, int64(frac*float64(c.MaxTokens))))
	}
}

// Latency is the fake provider's answer time: 50 ms plus 0.25 ms an output
// token.
func Latency(_ testsuite.Call, output int64) time.Duration {
	return 50*time.Millisecond + time.Duration(output)*250*time.Microsecond
}
