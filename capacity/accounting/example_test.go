package accounting_test

import (
	"fmt"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
)

// OpenAI charges max_tokens against its token limit at admission; Anthropic
// reserves the expected output and settles what the provider reports.
func ExampleProfileFor() {
	d := capacity.Demand{InputTokens: 1200, OutputTokens: 300, MaxTokens: 1000}
	for _, p := range []capacity.Provider{capacity.OpenAI, capacity.Anthropic} {
		profile, _ := accounting.ProfileFor(p)
		c := profile.Charges(d)
		fmt.Printf("%s reserves %d tokens, %d of them output\n", p, c[capacity.Tokens], c[capacity.OutputTokens])
	}
	// Output:
	// openai reserves 2200 tokens, 300 of them output
	// anthropic reserves 1500 tokens, 300 of them output
}

// Settle turns what the provider reported into the call's final charges:
// what it reserved beyond that comes back to the budget.
func ExampleAnthropicProfile_Settle() {
	var p accounting.AnthropicProfile
	d := capacity.Demand{InputTokens: 1200, OutputTokens: 300, MaxTokens: 1000}
	final := p.Settle(d, p.Charges(d), accounting.Completed, capacity.Usage{InputTokens: 1180, OutputTokens: 120})
	fmt.Println("tokens:", final[capacity.Tokens])
	// Output: tokens: 1300
}
