package activities_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// startRedisWorkers starts n gated workers on queue, each with its own
// redisstore.Store on the same Redis and key prefix: one budget shared by
// every worker.
func startRedisWorkers(t *testing.T, e *e2e, queue string, n int, limits map[string]capacity.Limits) {
	t.Helper()
	rdb := testenv.RedisClient(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "tge2e-" + hex.EncodeToString(b[:])
	creds := activities.StaticCredentials{"e2e": e2eKey}
	for range n {
		store, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix})
		require.NoError(t, err)
		t.Cleanup(func() { _ = store.Close() })
		plugin, err := interceptor.NewPlugin(interceptor.Options{
			Store:  store,
			Limits: func(s capacity.Scope) (capacity.Limits, bool) { l, ok := limits[s.LimitGroup]; return l, ok },
		})
		require.NoError(t, err)
		oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: creds, BaseURL: e.fp.OpenAIBaseURL()})
		require.NoError(t, err)
		w := worker.New(e.c, queue, worker.Options{Plugins: []worker.Plugin{plugin}})
		w.RegisterActivity(oa)
		w.RegisterWorkflow(GoodputWorkflow)
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}
}
