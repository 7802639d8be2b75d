package interceptor_test

import (
	"fmt"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// The plugin gates every model-call activity of the workers it is set on
// (worker.Options.Plugins) on the store's shared budgets. Limits is
// optional: a scope it does not configure runs on the limits its provider
// reports (OpenAI, Anthropic).
func ExampleNewPlugin() {
	limits := map[string]capacity.Limits{
		"gpt-4o": {RequestsPerMinute: 5_000, TokensPerMinute: 800_000},
	}
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store: capacity.NewMemoryStore(capacity.MemoryOptions{}), // redisstore.New for many workers
		Limits: func(s capacity.Scope) (capacity.Limits, bool) {
			l, ok := limits[s.LimitGroup]
			return l, ok
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(plugin.Name())

	// A store is the one option without a default.
	_, err = interceptor.NewPlugin(interceptor.Options{})
	fmt.Println(err)
	// Output:
	// tollgate.ModelCallGate
	// tollgate: invalid interceptor options: Store is required
}
