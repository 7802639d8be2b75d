package redisstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

func TestScopesListsUsedScopes(t *testing.T) {
	rdb := testClient(t)
	s, err := New(rdb, Options{Engine: EngineScripts, Prefix: testPrefix(t, rdb)})
	require.NoError(t, err)
	defer s.Close()
	other, err := New(rdb, Options{Engine: EngineScripts, Prefix: testPrefix(t, rdb)})
	require.NoError(t, err)
	defer other.Close()
	ctx := context.Background()
	a := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	b := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "team:b", Region: "eu"}
	for i, sc := range []capacity.Scope{a, b} {
		var c capacity.Charges
		c[capacity.Requests], c[capacity.InFlight] = 1, 1
		_, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60}, Call: "c", Attempt: 1 + i, Charges: c})
		require.NoError(t, err)
	}
	got, err := s.Scopes(ctx)
	require.NoError(t, err)
	require.Equal(t, []capacity.Scope{b, a}, got, "sorted by key")
	none, err := other.Scopes(ctx)
	require.NoError(t, err)
	require.Empty(t, none, "another prefix sees nothing")
}
