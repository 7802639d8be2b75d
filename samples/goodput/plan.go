package main

import (
	"fmt"
	"math"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/testsuite"
)

// Provider is one accounting the sample runs: its fake-provider wire format
// and the model it serves.
type Provider struct {
	Name  string
	Wire  testsuite.Provider
	Model string
}

// Providers the sample runs, by flag name.
var Providers = []Provider{
	{Name: "openai", Wire: testsuite.OpenAI, Model: "gpt-4o-mini"},
	{Name: "anthropic", Wire: testsuite.Anthropic, Model: "claude-sonnet-4-5"},
}

// Bucket is the provider's enforcement granularity: each per-minute bucket
// holds Window's worth of its limit.
type Bucket struct {
	Name   string
	Window time.Duration
}

// Buckets the sample runs, by flag name.
var Buckets = []Bucket{
	{Name: "5s", Window: 5 * time.Second},
	{Name: "1m", Window: testsuite.PerMinute},
}

// Slack of the dimensions meant not to bind: their theoretical minimum is
// this fraction of the binding one's (requests; Anthropic's output tokens,
// which are metered on actual use).
const (
	requestsSlack = 0.5
	outputSlack   = 0.6
)

// Plan returns the fake provider's limits for workload w so that its
// theoretical minimum drain is about target: the binding dimension (OpenAI's
// tokens, input + max_tokens; Anthropic's input tokens) gets the limit L
// with (charged − L × window/1m) / (L/1m) = target, the others less of a
// squeeze (requestsSlack, outputSlack). The run measures the real minimum
// from what the provider charged.
func Plan(p Provider, b Bucket, w Workload, target time.Duration) testsuite.Limits {
	d := w.Expect(target)
	limit := func(total, share float64) int64 {
		return int64(math.Ceil(total * float64(time.Minute) / float64(time.Duration(share*float64(target))+b.Window)))
	}
	l := testsuite.Limits{RequestsPerMinute: limit(d.Requests, requestsSlack), BurstWindow: b.Window}
	switch p.Wire {
	case testsuite.Anthropic:
		l.InputTokensPerMinute = limit(d.Input, 1)
		l.OutputTokensPerMinute = limit(d.Output, outputSlack)
	default:
		l.TokensPerMinute = limit(d.Input+d.MaxTokens, 1)
	}
	return l
}

// TollgateLimits is l in tollgate's terms: the limits only, every other
// field at its default (the tollgate strategies' configuration).
func TollgateLimits(l testsuite.Limits) capacity.Limits {
	return capacity.Limits{
		RequestsPerMinute:     l.RequestsPerMinute,
		TokensPerMinute:       l.TokensPerMinute,
		InputTokensPerMinute:  l.InputTokensPerMinute,
		OutputTokensPerMinute: l.OutputTokensPerMinute,
	}
}

// describe is l on one line.
func describe(l testsuite.Limits) string {
	s := fmt.Sprintf("RPM %d", l.RequestsPerMinute)
	for _, f := range []struct {
		name string
		v    int64
	}{{"TPM", l.TokensPerMinute}, {"ITPM", l.InputTokensPerMinute}, {"OTPM", l.OutputTokensPerMinute}} {
		if f.v > 0 {
			s += fmt.Sprintf(", %s %d", f.name, f.v)
		}
	}
	return s + ", buckets of " + l.BurstWindow.String()
}
