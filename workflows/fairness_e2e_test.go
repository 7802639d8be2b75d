package workflows_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
	"github.com/tollgate-dev/tollgate/workflows"
)

// TenantInput is a model call that never leaves the worker; it states no
// fairness key of its own.
type TenantInput struct{}

func (TenantInput) TollgateCall() interceptor.Call {
	return interceptor.Call{Provider: capacity.OpenAI, Model: "gpt-4o-mini", Credential: "default",
		Demand: capacity.Demand{InputTokens: 20, MaxTokens: 30}}
}

// TenantResult is the priority the activity ran with, and a usage for the
// gate to settle.
type TenantResult struct {
	Priority temporal.Priority
}

func (TenantResult) TollgateReport() interceptor.Report {
	return interceptor.Report{HasUsage: true, Usage: capacity.Usage{InputTokens: 20, OutputTokens: 10}}
}

// TenantWorkflow makes one bulk model call for tenant key.
func TenantWorkflow(ctx workflow.Context, key string) (TenantResult, error) {
	var r TenantResult
	_, err := workflows.CallModel(ctx, workflows.Options{FairnessKey: key, FairnessWeight: 3, ScheduleToClose: time.Minute},
		capacity.Bulk, []workflows.Call{{Activity: "TenantCall", Input: TenantInput{}}}, &r)
	return r, err
}

// leaseRecorder records the leases the gate is granted.
type leaseRecorder struct {
	capacity.Store
	mu     sync.Mutex
	leases []capacity.Lease
}

func (r *leaseRecorder) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	res, err := r.Store.Reserve(ctx, req)
	if err == nil && res.Granted {
		r.mu.Lock()
		r.leases = append(r.leases, res.Lease)
		r.mu.Unlock()
	}
	return res, err
}

// TestFairnessKeyOnADevServer: on a real dev server, the fairness key given
// to CallModel reaches the activity's Temporal priority (the key Temporal's
// matching dispatches by, with its weight) and the gate (the lease's key
// and weight, the store's flow), while the request states none.
func TestFairnessKeyOnADevServer(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := devserver.StartForTest(t)
	c := srv.Client()
	mem := capacity.NewMemoryStore(capacity.MemoryOptions{})
	store := &leaseRecorder{Store: mem}
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store: store,
		Limits: func(capacity.Scope) (capacity.Limits, bool) {
			return capacity.Limits{RequestsPerMinute: 600, TokensPerMinute: 60000}, true
		},
		Fairness: map[string]capacity.Fairness{"acme": {Weight: 3}},
	})
	require.NoError(t, err)
	const queue = "fairness-e2e"
	w := worker.New(c, queue, worker.Options{Plugins: []worker.Plugin{plugin}})
	w.RegisterWorkflow(TenantWorkflow)
	w.RegisterActivityWithOptions(func(ctx context.Context, _ TenantInput) (TenantResult, error) {
		return TenantResult{Priority: activity.GetInfo(ctx).Priority}, nil
	}, activity.RegisterOptions{Name: "TenantCall"})
	require.NoError(t, w.Start())
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, TenantWorkflow, "acme")
	require.NoError(t, err)
	var r TenantResult
	require.NoError(t, run.Get(ctx, &r))

	assert.Equal(t, temporal.Priority{PriorityKey: 5, FairnessKey: "acme", FairnessWeight: 3}, r.Priority,
		"the activity's priority: bulk's key, the tenant and its weight")
	store.mu.Lock()
	leases := append([]capacity.Lease(nil), store.leases...)
	store.mu.Unlock()
	require.Len(t, leases, 1)
	assert.Equal(t, "acme", leases[0].Key)
	assert.Equal(t, 3.0, leases[0].Weight, "the key's weight from Options.Fairness")
	assert.Equal(t, capacity.Bulk, leases[0].Class)
	// The flow's state is not read here: a scope idle again (the call
	// settled, its bucket refilled) starts its flows afresh.
	assert.EqualValues(t, 50, leases[0].Charges[capacity.Tokens], "the flow was charged input 20 + max_tokens 30")
}
