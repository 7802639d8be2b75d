package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Credential is the credential scope name of every call.
const Credential = "fairness"

// ChatRequest is the input of TenantChat: an OpenAI chat on behalf of a
// tenant.
type ChatRequest struct {
	activities.OpenAIChatRequest
	// Tenant is the call's fairness key; empty for the interactive stream
	// (its class's shared key).
	Tenant string
	// Tag names the call to the fake provider (testsuite.TagHeader):
	// "<tenant>/<index>".
	Tag string
}

// TollgateCall implements interceptor.ModelCall: the OpenAI call, with the
// tenant as its fairness key.
func (r ChatRequest) TollgateCall() interceptor.Call {
	c := r.OpenAIChatRequest.TollgateCall()
	c.FairnessKey = r.Tenant
	return c
}

// Activities are the sample's one activity, TenantChat.
type Activities struct {
	OpenAI *activities.OpenAI
}

// NewActivities returns the activities calling the fake provider at baseURL
// with a client that tags each request (tagTransport).
func NewActivities(baseURL string) (*Activities, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{
		Credentials: activities.StaticCredentials{Credential: apiKey},
		BaseURL:     baseURL,
		HTTPClient:  &http.Client{Transport: tagTransport{tr}},
	})
	return &Activities{OpenAI: oa}, err
}

// TenantChat is activities.OpenAI.Chat with the request tagged for the fake
// provider's record.
func (a *Activities) TenantChat(ctx context.Context, req ChatRequest) (activities.Result, error) {
	return a.OpenAI.Chat(context.WithValue(ctx, tagKey{}, req.Tag), req.OpenAIChatRequest)
}

type tagKey struct{}

// tagTransport sets testsuite.TagHeader to the tag of the request's context.
type tagTransport struct{ base http.RoundTripper }

func (t tagTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tag, ok := r.Context().Value(tagKey{}).(string); ok {
		r = r.Clone(r.Context())
		r.Header.Set(testsuite.TagHeader, tag)
	}
	return t.base.RoundTrip(r)
}

// Tag is the tag of call i of tenant.
func Tag(tenant string, i int) string { return fmt.Sprintf("%s/%d", tenant, i) }

// call runs call i of tenant (the stream's if tenant is Interactive) through
// workflows.CallModel, which states its class; weight is the tenant's
// weight (interceptor.Options.Fairness), 0 for the stream.
func call(ctx workflow.Context, w Workload, tenant string, weight float64, i int) error {
	c := w.Call(tenant, i)
	req := ChatRequest{
		OpenAIChatRequest: activities.OpenAIChatRequest{
			Model: Model, Credential: Credential, MaxTokens: c.MaxTokens, InputTokens: c.InputTokens(),
			Messages: []activities.Message{{Role: "user", Content: c.Prompt}},
		},
		Tenant: tenant,
		Tag:    Tag(tenant, i),
	}
	class := capacity.Bulk
	if tenant == Interactive {
		class, req.Tenant = capacity.Interactive, ""
	}
	var res activities.Result
	// The tenant's key and weight reach Temporal's matching too, so the
	// tenants' backlogs reach the workers by weight, as the gate shares
	// the scope.
	opts := workflows.Options{FairnessKey: req.Tenant, FairnessWeight: float32(weight)}
	_, err := workflows.CallModel(ctx, opts, class, []workflows.Call{{Activity: "TenantChat", Input: req}}, &res)
	return err
}

// TenantRun is TenantWorkflow's input: whose backlog, at what weight, how
// many calls.
type TenantRun struct {
	Workload Workload
	Tenant   string
	Weight   float64
	Calls    int
}

// Progress is where a tenant's backlog stands.
type Progress struct {
	Completed, Failed int
	// Last is when the last call completed or failed; zero while any waits
	// or runs.
	Last time.Time
}

// progressQuery is TenantWorkflow's query for its Progress.
const progressQuery = "progress"

// TenantWorkflow schedules a tenant's whole backlog at once and waits for
// every call.
func TenantWorkflow(ctx workflow.Context, r TenantRun) (Progress, error) {
	var p Progress
	if err := workflow.SetQueryHandler(ctx, progressQuery, func() (Progress, error) { return p, nil }); err != nil {
		return p, err
	}
	wg := workflow.NewWaitGroup(ctx)
	for i := range r.Calls {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			if err := call(ctx, r.Workload, r.Tenant, r.Weight, i); err != nil {
				p.Failed++
				return
			}
			p.Completed++
		})
	}
	wg.Wait(ctx)
	p.Last = workflow.Now(ctx)
	return p, nil
}

// InteractiveResult is one interactive call: when its workflow saw it
// complete (or fail), in workflow time.
type InteractiveResult struct {
	Done   time.Time
	Failed bool
}

// InteractiveWorkflow makes interactive call i. The stream is paced by the
// starter: Temporal timers fire on whole seconds, too coarse a tick.
func InteractiveWorkflow(ctx workflow.Context, w Workload, i int) (InteractiveResult, error) {
	err := call(ctx, w, Interactive, 0, i)
	return InteractiveResult{Done: workflow.Now(ctx), Failed: err != nil}, nil
}

// scheduledAt returns when workflow id first scheduled an activity (its
// first ActivityTaskScheduled event), or the zero time if it has not.
func scheduledAt(ctx context.Context, c client.Client, id string) (time.Time, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return time.Time{}, err
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			return ev.GetEventTime().AsTime(), nil
		}
	}
	return time.Time{}, nil
}
