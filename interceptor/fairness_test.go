package interceptor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/workflows"
)

// FairCase is one call of FairWorkflow: the workflow states a class name
// and a fairness key as Via says (viaRequest: none), and the request may
// state its own.
type FairCase struct {
	Via       int
	ClassName string // the workflow's class: WithClassName, Options.ClassName
	Key       string // the workflow's fairness key: WithFairnessKey, Options.FairnessKey
	In        ChatInput
}

// FairWorkflow makes one model call as c says.
func FairWorkflow(ctx workflow.Context, c FairCase) (Outcome, error) {
	with := func(ctx workflow.Context) workflow.Context {
		return interceptor.WithFairnessKey(interceptor.WithClassName(ctx, c.ClassName), c.Key)
	}
	var err error
	switch c.Via {
	case viaRequest:
		_, err = ChatWorkflow(ctx, []ChatInput{c.In})
	case viaCallModel:
		var r ChatResult
		_, err = workflows.CallModel(ctx, workflows.Options{ClassName: c.ClassName, FairnessKey: c.Key},
			capacity.Standard, []workflows.Call{{Activity: "Chat", Input: c.In}}, &r)
	case viaWithClass:
		ctx = workflow.WithActivityOptions(with(ctx), workflows.Options{}.ActivityOptions(capacity.Standard))
		err = workflow.ExecuteActivity(ctx, "Chat", c.In).Get(ctx, nil)
	case viaLocal:
		ctx = workflow.WithLocalActivityOptions(with(ctx), workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		err = workflow.ExecuteLocalActivity(ctx, "Chat", c.In).Get(ctx, nil)
	}
	o := Outcome{OK: err == nil}
	var ae *temporal.ApplicationError
	switch {
	case errors.As(err, &ae):
		o.Type, o.NonRetryable = ae.Type(), ae.NonRetryable()
	case err != nil:
		o.Type = err.Error()
	}
	return o, nil
}

// requestRecorder records every request the gate makes and every lease it
// is granted.
type requestRecorder struct {
	capacity.Store
	mu       sync.Mutex
	requests []capacity.Request
	leases   []capacity.Lease
}

func (r *requestRecorder) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	res, err := r.Store.Reserve(ctx, req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, req)
	if err == nil && res.Granted {
		r.leases = append(r.leases, res.Lease)
	}
	return res, err
}

func (r *requestRecorder) seen() ([]capacity.Request, []capacity.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]capacity.Request(nil), r.requests...), append([]capacity.Lease(nil), r.leases...)
}

// userClasses are the classes of the user-class cases: a premium class
// above the built-ins, a standard one and a batch class that ages.
var userClasses = []capacity.ClassDef{
	{Name: "premium", Rank: 3, Weight: 2},
	{Name: "standard", Rank: 1},
	{Name: "batch", Rank: 0, Weight: 0.5, Floor: 0.2, AgingAfter: time.Hour},
}

// fairRun is what runFairCase saw: the workflow's outcome, the gate's
// requests and leases, and the provider's calls.
type fairRun struct {
	Outcome
	requests []capacity.Request
	leases   []capacity.Lease
	calls    int64
	store    *capacity.MemoryStore
}

func runFairCase(t *testing.T, classes []capacity.ClassDef, c FairCase) fairRun {
	t.Helper()
	rec := &requestRecorder{}
	e := newEnv(t, capacity.Limits{RequestsPerMinute: 600}, func(o *interceptor.Options) {
		rec.Store, o.Store = o.Store, rec
		o.Classes = classes
		o.Fairness = map[string]capacity.Fairness{"acme": {Weight: 3}}
	})
	e.RegisterWorkflow(FairWorkflow)
	e.ExecuteWorkflow(FairWorkflow, c)
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())
	var o Outcome
	require.NoError(t, e.GetWorkflowResult(&o))
	reqs, leases := rec.seen()
	return fairRun{Outcome: o, requests: reqs, leases: leases, calls: e.provider.calls.Load(), store: e.store}
}

func named(class, key string) ChatInput {
	in := call("gpt-4o", "team-a")
	in.ClassName, in.FairnessKey = class, key
	return in
}

// TestFairnessKeyReachesTheStore: the fairness key the workflow states
// (WithFairnessKey, CallModel's Options.FairnessKey, on activities and
// local activities) or the request states is the key the gate reserves
// with, with the weight of Options.Fairness, and the key of the lease.
func TestFairnessKeyReachesTheStore(t *testing.T) {
	for _, tc := range []struct {
		name       string
		c          FairCase
		key        string
		wantWeight float64 // Request.Fairness.Weight
	}{
		{"via CallModel", FairCase{Via: viaCallModel, Key: "acme", In: named("", "")}, "acme", 3},
		{"via WithFairnessKey", FairCase{Via: viaWithClass, Key: "acme", In: named("", "")}, "acme", 3},
		{"via WithFairnessKey on a local activity", FairCase{Via: viaLocal, Key: "beta", In: named("", "")}, "beta", 0},
		{"request only", FairCase{Via: viaRequest, In: named("", "acme")}, "acme", 3},
		{"workflow and request agree", FairCase{Via: viaCallModel, Key: "acme", In: named("", "acme")}, "acme", 3},
		{"no key anywhere", FairCase{Via: viaCallModel, In: named("", "")}, "", 0},
		{"an empty WithFairnessKey states none", FairCase{Via: viaWithClass, Key: "", In: named("", "beta")}, "beta", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runFairCase(t, nil, tc.c)
			require.True(t, r.OK, "failed: %s", r.Type)
			require.Len(t, r.requests, 1)
			assert.Equal(t, tc.key, r.requests[0].Fairness.Key)
			assert.Equal(t, tc.wantWeight, r.requests[0].Fairness.Weight, "Options.Fairness's weight")
			require.Len(t, r.leases, 1)
			assert.Equal(t, tc.key, r.leases[0].Key)
			// The flow was served at the key's weight (1 if unset). Its
			// state is not read here: a scope idle again starts its flows
			// afresh.
			assert.Equal(t, max(tc.wantWeight, 1), r.leases[0].Weight)
		})
	}
}

// TestClassesAndKeysMisconfigured: a request whose own key or class
// differs from the workflow's, a key the gate refuses and a class name it
// does not know fail non-retryable before anything is reserved or sent.
func TestClassesAndKeysMisconfigured(t *testing.T) {
	for _, tc := range []struct {
		name    string
		classes []capacity.ClassDef
		c       FairCase
	}{
		{"keys disagree via CallModel", nil, FairCase{Via: viaCallModel, Key: "acme", In: named("", "beta")}},
		{"keys disagree via WithFairnessKey", nil, FairCase{Via: viaWithClass, Key: "acme", In: named("", "beta")}},
		{"invalid workflow key", nil, FairCase{Via: viaWithClass, Key: "acme corp", In: named("", "")}},
		{"invalid request key", nil, FairCase{Via: viaRequest, In: named("", "acme/1")}},
		{"unknown built-in class name", nil, FairCase{Via: viaWithClass, ClassName: "premium", In: named("", "")}},
		{"unknown request class name", nil, FairCase{Via: viaRequest, In: named("urgent", "")}},
		{"unknown user class in the header", userClasses, FairCase{Via: viaCallModel, ClassName: "gold", In: named("", "")}},
		{"unknown user class in the request", userClasses, FairCase{Via: viaRequest, In: named("gold", "")}},
		{"built-in class not among the user classes", userClasses, FairCase{Via: viaRequest, In: withClass(capacity.Interactive)}},
		{"class names disagree", userClasses, FairCase{Via: viaWithClass, ClassName: "premium", In: named("batch", "")}},
		{"request's Class and ClassName disagree", nil, FairCase{Via: viaRequest, In: func() ChatInput {
			in := named("bulk", "")
			in.Class = capacity.Interactive
			return in
		}()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runFairCase(t, tc.classes, tc.c)
			assert.False(t, r.OK)
			assert.Equal(t, tgerrors.TypeMisconfigured, r.Type)
			assert.True(t, r.NonRetryable)
			assert.Empty(t, r.requests, "refused before reserving")
			assert.Zero(t, r.calls, "refused before calling the provider")
		})
	}
}

// TestUserClassesReachTheStore: with Options.Classes, the class a call
// names (in the header, or in the request) is sent to the store as its
// index with the class's rule; a call that names none is of the class
// named "standard". With the built-in classes the store gets no rule.
func TestUserClassesReachTheStore(t *testing.T) {
	for _, tc := range []struct {
		name      string
		classes   []capacity.ClassDef
		c         FairCase
		wantClass capacity.Class
		wantRule  *capacity.ClassRule
	}{
		{"header names premium", userClasses, FairCase{Via: viaWithClass, ClassName: "premium", In: named("", "")},
			0, &capacity.ClassRule{Rank: 3, Weight: 2}},
		{"CallModel names batch", userClasses, FairCase{Via: viaCallModel, ClassName: "batch", In: named("", "")},
			2, &capacity.ClassRule{Rank: 0, Floor: 0.2, Weight: 0.5}},
		{"request names batch", userClasses, FairCase{Via: viaRequest, In: named("batch", "")},
			2, &capacity.ClassRule{Rank: 0, Floor: 0.2, Weight: 0.5}},
		{"header and request agree", userClasses, FairCase{Via: viaWithClass, ClassName: "premium", In: named("premium", "")},
			0, &capacity.ClassRule{Rank: 3, Weight: 2}},
		{"no class is standard", userClasses, FairCase{Via: viaRequest, In: named("", "")},
			1, &capacity.ClassRule{Rank: 1}},
		{"no standard defined: the first", userClasses[2:], FairCase{Via: viaRequest, In: named("", "")},
			0, &capacity.ClassRule{Rank: 0, Floor: 0.2, Weight: 0.5}},
		{"a built-in Class by its name", capacity.DefaultClasses(capacity.Limits{BulkFloor: 0.3}), FairCase{Via: viaRequest, In: withClass(capacity.Bulk)},
			capacity.Bulk, &capacity.ClassRule{Rank: 0, Floor: 0.3, Weight: 1}},
		{"built-ins: a name", nil, FairCase{Via: viaWithClass, ClassName: "interactive", In: named("", "")}, capacity.Interactive, nil},
		{"built-ins: a request's name", nil, FairCase{Via: viaRequest, In: named("bulk", "")}, capacity.Bulk, nil},
		{"built-ins: nothing", nil, FairCase{Via: viaRequest, In: named("", "")}, capacity.Standard, nil},
		{"an empty WithClassName states none", nil, FairCase{Via: viaWithClass, ClassName: "", In: named("bulk", "")}, capacity.Bulk, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runFairCase(t, tc.classes, tc.c)
			require.True(t, r.OK, "failed: %s", r.Type)
			require.Len(t, r.requests, 1)
			assert.Equal(t, tc.wantClass, r.requests[0].Class)
			assert.Equal(t, tc.wantRule, r.requests[0].Rule)
			require.Len(t, r.leases, 1)
			assert.Equal(t, tc.wantClass, r.leases[0].Class)
		})
	}
}

// TestInvalidClassesAreRefused: Options.Classes that NewClassSet refuses
// make NewPlugin fail with ErrInvalidOptions.
func TestInvalidClassesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		classes []capacity.ClassDef
	}{
		{"empty", []capacity.ClassDef{}},
		{"duplicate", []capacity.ClassDef{{Name: "a"}, {Name: "a"}}},
		{"bad name", []capacity.ClassDef{{Name: "a b"}}},
		{"rank too high", []capacity.ClassDef{{Name: "a", Rank: capacity.MaxRank + 1}}},
		{"floor of 1", []capacity.ClassDef{{Name: "a", Floor: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := interceptor.NewPlugin(interceptor.Options{
				Store:   capacity.NewMemoryStore(capacity.MemoryOptions{}),
				Limits:  func(capacity.Scope) (capacity.Limits, bool) { return rpmLimits(60), true },
				Classes: tc.classes,
			})
			require.ErrorIs(t, err, interceptor.ErrInvalidOptions)
			assert.ErrorIs(t, err, capacity.ErrInvalidClasses)
		})
	}
}

// TestKeyQuotaFailsOnlyItsKey: a fairness key that spent its tokens for
// the day fails non-retryable with tollgate.QuotaExhausted (reason
// key_quota, reset at the day window's end) without reaching the provider,
// and the scope is not blocked: another key's call goes on.
func TestKeyQuotaFailsOnlyItsKey(t *testing.T) {
	limits := capacity.Limits{RequestsPerMinute: 600, TokensPerMinute: 60000, SafetyMargin: 1, Burst: 5 * time.Second}
	e := newEnv(t, limits, func(o *interceptor.Options) {
		// A call reserves 61 tokens and settles at 100 or more: the
		// second does not fit the day's 150.
		o.Fairness = map[string]capacity.Fairness{"acme": {TokensPerDay: 150}}
	})
	acme, beta := named("", "acme"), named("", "beta")
	out := e.run(t, Step{In: acme}, Step{In: acme}, Step{In: beta})
	require.True(t, out[0].OK)
	require.True(t, out[2].OK, "another key is not held back")
	assert.Equal(t, int64(2), e.provider.calls.Load(), "the refused call never reached the provider")

	refused := out[1]
	assert.False(t, refused.OK)
	assert.Equal(t, tgerrors.TypeQuotaExhausted, refused.Type)
	assert.True(t, refused.NonRetryable)
	require.True(t, refused.HasDetails)
	assert.Equal(t, tgerrors.ReasonKeyQuota, refused.Details.Reason)
	assert.Equal(t, "tokens_per_day", refused.Details.Dimension)
	assert.Equal(t, gpt4o.Key(), refused.Details.Scope)
	assert.True(t, refused.Details.ResetAt.After(refused.Done), "reset at the day window's end")
	assert.LessOrEqual(t, refused.Details.ResetAt.Sub(refused.Done), 24*time.Hour)

	snap, err := e.store.Snapshot(context.Background(), gpt4o)
	require.NoError(t, err)
	assert.Empty(t, snap.Blocks, "the scope is not blocked")
	require.Len(t, snap.Keys, 1)
	assert.Equal(t, "acme", snap.Keys[0].Key)
	// The first call only (the refused one charged nothing): at least its
	// 100 tokens of usage, less than the cap.
	assert.GreaterOrEqual(t, snap.Keys[0].DayUsed, 100.0)
	assert.Less(t, snap.Keys[0].DayUsed, 150.0)
}

// TestKeyShareWaits: a call whose key used its share of the scope
// (DenyKeyCap) is retried when the share has refilled, like a capacity
// wait, without booking the scope's capacity.
func TestKeyShareWaits(t *testing.T) {
	// 60 RPM in a 2 s burst: 2 requests; acme's half share is 1 request,
	// refilling at 0.5 a second.
	limits := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: 2 * time.Second}
	e := newEnv(t, limits, func(o *interceptor.Options) {
		o.Fairness = map[string]capacity.Fairness{"acme": {Share: 0.5}}
	})
	acme := named("", "acme")
	out := e.run(t, Step{In: acme}, Step{In: acme})
	require.True(t, out[0].OK)
	require.True(t, out[1].OK)

	log := e.attemptLog()
	require.Len(t, log, 3, "the second call waited once")
	ae := appError(t, log[1].err)
	assert.Equal(t, tgerrors.TypeCapacityWait, ae.Type())
	assert.False(t, ae.NonRetryable())
	assert.Contains(t, ae.Message(), "key_cap")
	assert.GreaterOrEqual(t, ae.NextRetryDelay(), 2*time.Second, "until the share has refilled")
	assert.LessOrEqual(t, ae.NextRetryDelay(), 2500*time.Millisecond, "plus jitter")
	d, ok := tgerrors.DetailsOf(ae)
	require.True(t, ok)
	assert.Equal(t, "requests", d.Dimension)
}

// TestFairnessMetrics: each granted call records its queue age (from its
// scheduling to its admission) and its granted tokens, and each settled
// call the tokens it was finally charged, by scope, class name and
// fairness key ("none" without one); the admissions counter is tagged with
// the user class's name.
func TestFairnessMetrics(t *testing.T) {
	rec := newRecording()
	e, _ := newMetricsEnvWith(t, rec, func(o *interceptor.Options) {
		o.Classes = userClasses
		o.Limits = func(capacity.Scope) (capacity.Limits, bool) {
			return capacity.Limits{RequestsPerMinute: 6000, TokensPerMinute: 600000, SafetyMargin: 1}, true
		}
	}, nil)
	e.ExecuteWorkflow(StepsWorkflow, []Step{{In: named("premium", "acme")}, {In: named("premium", "acme")}, {In: named("batch", "")}})
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())

	scope := gpt4o.Key()
	acme := map[string]string{"scope": scope, "class": "premium", "fairness_key": "acme"}
	none := map[string]string{"scope": scope, "class": "batch", "fairness_key": "none"}
	for _, tc := range []struct {
		name  string
		tags  map[string]string
		calls float64
	}{
		{"premium/acme", acme, 2},
		{"batch without a key", none, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.calls, rec.value(t, "tollgate.queue.age", tc.tags), "one queue age per granted call")
			// A call reserves input 11 + max_tokens 50 and is charged
			// max(reserved, used 100) tokens.
			assert.Equal(t, 61*tc.calls, rec.value(t, "tollgate.tokens.granted", tc.tags))
			assert.Equal(t, 100*tc.calls, rec.value(t, "tollgate.tokens.used", tc.tags))
		})
	}
	assert.Equal(t, 2.0, rec.value(t, "tollgate.admissions", map[string]string{"scope": scope, "class": "premium", "result": "granted"}))
	assert.Empty(t, rec.find("tollgate.queue.age", map[string]string{"class": "standard"}), "no class but the calls' own")
	assert.NotContains(t, rec.dump(), "sk-test-a", "no API key in the metrics")
}
