package interceptor_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// keyed is an OpenAI-compatible server that answers by API key: each key's
// script of replies, then 200s; it counts each key's answers by status.
type keyed struct {
	mu      sync.Mutex
	scripts map[string][]reply
	seen    map[string]map[int]int // key → status → answers
	first   map[string]time.Time   // key → arrival of its first request
}

func newKeyed(t *testing.T, scripts map[string][]reply) (*keyed, string) {
	k := &keyed{scripts: scripts, seen: map[string]map[int]int{}, first: map[string]time.Time{}}
	srv := httptest.NewServer(http.HandlerFunc(k.serve))
	t.Cleanup(srv.Close)
	return k, srv.URL
}

func (k *keyed) serve(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	k.mu.Lock()
	rep := reply{status: 200}
	if s := k.scripts[key]; len(s) > 0 {
		rep = s[0]
		if len(s) > 1 {
			k.scripts[key] = s[1:]
		} else if rep.status == 429 {
			k.scripts[key] = nil // one 429; a refused key stays refused
		}
	}
	if k.seen[key] == nil {
		k.seen[key] = map[int]int{}
		k.first[key] = time.Now()
	}
	status := rep.status
	if status == 0 {
		status = 200
	}
	k.seen[key][status]++
	k.mu.Unlock()
	for h, v := range rep.header {
		w.Header().Set(h, v)
	}
	w.Header().Set("content-type", "application/json")
	if status == 200 {
		w.WriteHeader(200)
		fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":90,"completion_tokens":10,"total_tokens":100}}`)
		return
	}
	w.WriteHeader(status)
	fmt.Fprint(w, rep.body)
}

func (k *keyed) answers(key string) map[int]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[int]int{}
	for s, n := range k.seen[key] {
		out[s] = n
	}
	return out
}

// poolEnv is a test environment whose activity resolves key-1..key-4 and
// whose gate has the pool "pool" of members.
func poolEnv(t *testing.T, members []string, scripts map[string][]reply) (*env, *keyed) {
	e := newEnv(t, rpmLimits(6000), func(o *interceptor.Options) {
		o.Pools = map[string][]string{"pool": members}
	})
	k, url := newKeyed(t, scripts)
	e.acts.baseURL = url
	for i := 1; i <= 4; i++ {
		e.acts.keys[fmt.Sprintf("key-%d", i)] = fmt.Sprintf("sk-test-key%d", i)
	}
	return e, k
}

func poolScope(key string) capacity.Scope {
	return capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: key}
}

// TestPoolReroutes: a call on a pool meets a revoked key and a key at its
// rate limit; each is blocked (the revoked one on every model, the other
// cooled), the call goes on to the third key at once, costing no failure,
// and neither key is called again.
func TestPoolReroutes(t *testing.T) {
	e, k := poolEnv(t, []string{"key-1", "key-2", "key-3"}, map[string][]reply{
		"sk-test-key1": {badKey()},
		"sk-test-key2": {rateLimited("5")},
	})
	// key-3 is the most used, so the call tries key-1 and key-2 first.
	var c capacity.Charges
	c[capacity.Requests] = 1
	for i := range 90 {
		res, err := e.store.Reserve(context.Background(), capacity.Request{Scope: poolScope("key-3"), Limits: rpmLimits(6000),
			Call: fmt.Sprint("other-", i), Attempt: 1, Charges: c})
		require.NoError(t, err)
		require.True(t, res.Granted)
	}

	var steps []Step
	for range 6 {
		steps = append(steps, Step{In: call("gpt-4o", "pool")})
	}
	out := e.run(t, steps...)
	for i, o := range out {
		assert.True(t, o.OK, "call %d: %+v", i, o)
	}
	assert.Equal(t, map[int]int{401: 1}, k.answers("sk-test-key1"), "key-1: one 401, then out of the pool")
	assert.Equal(t, map[int]int{429: 1}, k.answers("sk-test-key2"), "key-2: one 429, then cooling")
	assert.Equal(t, map[int]int{200: 6}, k.answers("sk-test-key3"))

	log := e.attemptLog()
	require.Len(t, log, 8, "the first call went round two keys")
	for _, a := range log[:2] {
		ae := appError(t, a.err)
		assert.Equal(t, tgerrors.TypeCapacityWait, ae.Type(), "a key's own failure sends the call on: %v", ae)
		assert.Contains(t, ae.Message(), "pool pool: key-")
		assert.Less(t, ae.NextRetryDelay(), 200*time.Millisecond, "at once")
	}

	ctx := context.Background()
	other := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o-mini", Credential: "key-1"}
	snap, err := e.store.Snapshot(ctx, other)
	require.NoError(t, err)
	b, out1 := snap.OutBlock()
	require.True(t, out1, "a revoked key is out on every model")
	assert.Equal(t, capacity.CredentialDisabled, b.Reason)
	snap, err = e.store.Snapshot(ctx, poolScope("key-2"))
	require.NoError(t, err)
	_, out2 := snap.OutBlock()
	assert.False(t, out2, "a 429 only cools its key")
	assert.Positive(t, snap.Paused())
	snap, err = e.store.Snapshot(ctx, poolScope("key-3"))
	require.NoError(t, err)
	assert.Empty(t, snap.Blocks)
}

// TestPoolUnpaidKey: a key whose account is out of credit is taken out on
// every model it serves: the pool goes on without it, and a call naming it
// directly on another model is refused without reaching the provider.
func TestPoolUnpaidKey(t *testing.T) {
	e, k := poolEnv(t, []string{"key-3", "key-4"}, map[string][]reply{"sk-test-key4": {quotaExhausted()}})
	// key-3 is busier, so the first call goes on key-4.
	var c capacity.Charges
	c[capacity.Requests] = 1
	res, err := e.store.Reserve(context.Background(), capacity.Request{Scope: poolScope("key-3"), Limits: rpmLimits(6000), Call: "other", Attempt: 1, Charges: c})
	require.NoError(t, err)
	require.True(t, res.Granted)

	out := e.run(t, Step{In: call("gpt-4o", "pool")}, Step{In: call("gpt-4o", "pool")}, Step{In: call("gpt-4o-mini", "key-4")})
	assert.True(t, out[0].OK)
	assert.True(t, out[1].OK)
	assert.Equal(t, tgerrors.TypeQuotaExhausted, out[2].Type)
	assert.True(t, out[2].NonRetryable)
	assert.Equal(t, map[int]int{429: 1}, k.answers("sk-test-key4"), "one insufficient_quota, no more")
	assert.Equal(t, map[int]int{200: 2}, k.answers("sk-test-key3"))
}

// TestPoolExhausted: when every key of the pool is refused, the call fails
// non-retryable, typed by the keys' reasons, with reason pool_exhausted and
// every key named.
func TestPoolExhausted(t *testing.T) {
	e, k := poolEnv(t, []string{"key-1", "key-2"}, map[string][]reply{
		"sk-test-key1": {badKey()},
		"sk-test-key2": {badKey()},
	})
	out := e.run(t, Step{In: call("gpt-4o", "pool")})
	require.False(t, out[0].OK)
	assert.Equal(t, tgerrors.TypeBadCredential, out[0].Type)
	assert.True(t, out[0].NonRetryable)
	require.True(t, out[0].HasDetails)
	assert.Equal(t, tgerrors.ReasonPoolExhausted, out[0].Details.Reason)
	assert.Equal(t, "openai/gpt-4o/pool", out[0].Details.Scope)
	assert.Equal(t, map[int]int{401: 1}, k.answers("sk-test-key1"))
	assert.Equal(t, map[int]int{401: 1}, k.answers("sk-test-key2"))
	last := e.attemptLog()[2].err
	for _, want := range []string{"key-1 credential_disabled (invalid_api_key)", "key-2 credential_disabled (invalid_api_key)"} {
		assert.Contains(t, last.Error(), want)
	}
	assert.NotContains(t, last.Error(), "sk-test", "names, never keys")
}

// TestPoolWaitsOutAKnownPause: when every key of the pool is cooling, the
// call waits in-process for the first back instead of going round the
// pool, and goes in one attempt.
func TestPoolWaitsOutAKnownPause(t *testing.T) {
	store := capacity.NewMemoryStore(capacity.MemoryOptions{}) // the real clock: a short local wait
	e := newEnvWithStore(t, store, rpmLimits(6000), func(o *interceptor.Options) {
		o.Pools = map[string][]string{"pool": {"key-1", "key-2"}}
		o.Clock = nil
		o.MaxLocalWait = 5 * time.Second
	})
	k, url := newKeyed(t, nil)
	e.acts.baseURL = url
	e.acts.keys["key-1"], e.acts.keys["key-2"] = "sk-test-key1", "sk-test-key2"
	now := time.Now()
	require.NoError(t, store.Block(context.Background(), poolScope("key-1"), capacity.Block{Reason: capacity.Cooldown, Until: now.Add(400 * time.Millisecond)}))
	require.NoError(t, store.Block(context.Background(), poolScope("key-2"), capacity.Block{Reason: capacity.Cooldown, Until: now.Add(200 * time.Millisecond)}))

	out := e.run(t, Step{In: call("gpt-4o", "pool")})
	require.True(t, out[0].OK)
	assert.False(t, k.firstAt("sk-test-key2").Before(now.Add(200*time.Millisecond)), "waited for key-2's cooldown to end")
	for _, a := range e.attemptLog() {
		assert.NoError(t, a.err, "one attempt, no trip round the pool")
	}
	assert.Equal(t, map[int]int{200: 1}, k.answers("sk-test-key2"))
	assert.Empty(t, k.answers("sk-test-key1"))
}

// TestPoolLeavesAKeyBlockedWhileWaiting: a call waiting in-process for its
// key leaves it when the key is cooled after the call chose it, and goes
// on the other key.
func TestPoolLeavesAKeyBlockedWhileWaiting(t *testing.T) {
	mem := capacity.NewMemoryStore(capacity.MemoryOptions{})
	ctx := context.Background()
	// Once the call has booked its place on key-1, a 429 elsewhere cools
	// key-1 for 10 s.
	var once sync.Once
	var key1Until time.Time
	store := &hookStore{MemoryStore: mem, after: func(r capacity.Request, res capacity.Reservation) {
		if r.Scope == poolScope("key-1") && r.Book && res.Booked {
			once.Do(func() {
				key1Until = time.Now().Add(10 * time.Second)
				require.NoError(t, mem.Block(ctx, poolScope("key-1"), capacity.Block{Reason: capacity.Cooldown, Until: key1Until}))
			})
		}
	}}
	limits := rpmLimits(600) // a 10-request bucket, 10 a second
	e := newEnvWithStore(t, mem, limits, func(o *interceptor.Options) {
		o.Store = store
		o.Pools = map[string][]string{"pool": {"key-1", "key-2"}}
		o.Clock = nil
		o.MaxLocalWait = 5 * time.Second
	})
	k, url := newKeyed(t, nil)
	e.acts.baseURL = url
	e.acts.keys["key-1"], e.acts.keys["key-2"] = "sk-test-key1", "sk-test-key2"
	var c capacity.Charges
	c[capacity.Requests] = 1
	for i := range 12 { // 10 granted, 2 booked: key-1 has room in ~300 ms
		_, err := mem.Reserve(ctx, capacity.Request{Scope: poolScope("key-1"), Limits: limits, Call: fmt.Sprint("other-", i), Attempt: 1, Charges: c, Book: true})
		require.NoError(t, err)
	}
	start := time.Now()
	require.NoError(t, mem.Block(ctx, poolScope("key-2"), capacity.Block{Reason: capacity.Cooldown, Until: start.Add(600 * time.Millisecond)}))

	out := e.run(t, Step{In: call("gpt-4o", "pool")})
	require.True(t, out[0].OK)
	log := e.attemptLog()
	require.Len(t, log, 2)
	assert.True(t, tgerrors.IsCapacityWait(log[0].err), "left key-1: %v", log[0].err)
	assert.Contains(t, log[0].err.Error(), "key-1 cooldown")
	assert.Empty(t, k.answers("sk-test-key1"))
	assert.Equal(t, map[int]int{200: 1}, k.answers("sk-test-key2"))
	sent := k.firstAt("sk-test-key2")
	assert.False(t, sent.Before(start.Add(600*time.Millisecond)), "went when key-2 came back")
	require.False(t, key1Until.IsZero(), "key-1 was cooled")
	assert.True(t, sent.Before(key1Until), "not after key-1's cooldown")
}

// firstAt returns when the provider saw key's first request (zero if none).
func (k *keyed) firstAt(key string) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.first[key]
}

// hookStore calls after with each Reserve's request and answer.
type hookStore struct {
	*capacity.MemoryStore
	after func(capacity.Request, capacity.Reservation)
}

func (h *hookStore) Reserve(ctx context.Context, r capacity.Request) (capacity.Reservation, error) {
	res, err := h.MemoryStore.Reserve(ctx, r)
	if err == nil {
		h.after(r, res)
	}
	return res, err
}
