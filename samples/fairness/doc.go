// Command fairness shows weighted fair sharing of one quota between tenants,
// measured in the tokens the provider charged them: three bulk tenants A, B
// and C with fairness weights 1, 1 and 3, each scheduling a large backlog of
// long-tailed calls at once and together saturating one scope; a fourth
// bulk tenant D (weight 1) arriving halfway; an interactive stream on top
// (class Interactive, a small call every 290 ms, about 15 % of the quota).
//
// Every call is a real Temporal activity on a dev server the program starts
// (with Temporal's priority matcher and task-queue fairness,
// devserver.FairnessMatcher), scheduled with workflows.CallModel (class
// Bulk or Interactive; a tenant's calls carry its key and weight to
// Temporal's matching, workflows.Options.FairnessKey and FairnessWeight,
// so its backlog reaches the workers by weight), gated by the tollgate
// plugin with each tenant as the call's fairness key (interceptor.Call
// FairnessKey, from the activity input's TollgateCall), the weights in
// interceptor.Options.Fairness and a FairStart of 1 s (the tenants'
// first calls gather and share the first burst), and sent through the official OpenAI SDK to
// the testsuite's fake provider: one scope, OpenAI's accounting (prompt +
// max_tokens charged at admission), 900,000 tokens and 3,000 requests a
// minute enforced in 5 s buckets. Each worker has room for every call of
// the run (MaxConcurrentActivityExecutionSize) and 16 activity pollers, so
// every waiting call waits in the store. By default one worker runs in the
// process on a memory store; with -redis, -workers processes (the program
// re-executed with a hidden -worker flag) share a Redis store.
//
// A run: A, B and C schedule their backlogs and the stream starts; D
// schedules its backlog 12 s (-short: 6 s) after the first bulk request
// reached the provider; the run ends when the first bulk tenant has
// drained, which the backlogs are sized (Plan) to make about 18 s (-short:
// 6 s) after D's arrival; the rest is terminated.
//
// # Definitions
//
// Everything is measured from the fake provider's record of each request
// (testsuite.Entry): its arrival, its tag, what it was charged. Each
// request carries its call's tag, "<tenant>/<index>", in the
// testsuite.TagHeader header, which the record keeps; no prompt text is
// logged. A tenant's service is the tokens charged (Entry.Cost(Tokens)) for
// its admitted requests, counted at their arrival.
//
//   - A bulk tenant is backlogged from the moment its workflow scheduled its
//     backlog (the first ActivityTaskScheduled event of its history) until
//     its last call completed. The measured window ends when the first
//     bulk tenant stopped being backlogged.
//   - jain_index: Jain's index (Σx)² / (n Σx²) over x = tokens / weight of
//     the tenants backlogged through an interval, for two intervals: from
//     the moment A, B and C were all backlogged to D's scheduling (A, B,
//     C: jain_index_abc), and from D's scheduling to the window's end (A,
//     B, C, D: jain_index_abcd). jain_index is the smaller.
//   - max_service_gap_tokens: for every pair of tenants, from the moment
//     both were backlogged to the window's end (or either's drain), their
//     cumulative tokens / weight counted from that moment, compared after
//     each moment a request arrives; the largest difference over all pairs
//     and moments. largest_call_tokens is the largest bulk request the
//     provider admitted in the window, for the target gap ≤ 2 × largest.
//   - newcomer_wait_s: from D's scheduling to its first request's arrival.
//   - interactive_p99_s: the 99th percentile (nearest rank) of the
//     interactive calls' schedule-to-dispatch latency: from the call's
//     activity being scheduled (its workflow's first ActivityTaskScheduled
//     event) to its first request's arrival at the provider. A call never
//     dispatched counts until the window's end.
//     interactive_p99_completion_s is the same to the workflow seeing the
//     call complete.
//   - bulk_share_of_leftover: bulk tokens / (capacity − interactive
//     tokens) over the saturated window, from the first request's arrival
//     to the window's end, where capacity = the provider's bucket + its
//     rate × the window (the bucket starts full).
//   - provider_429s: the 429s the fake provider returned, all run long.
//
// Context fields besides: max_service_gap_abcd_tokens (the gap counted
// from D's scheduling, when every call of A, B and C has long reached the
// store), each tenant's tokens in the two intervals, capacity and tokens
// served, the window's length (duration_s, from the first request).
//
// The targets (issue 11): jain_index ≥ 0.98, max_service_gap_tokens ≤ 2 ×
// largest_call_tokens, newcomer_wait_s ≤ one refill period (5 s),
// interactive_p99_s ≤ 0.5, bulk_share_of_leftover ≥ 0.9, provider_429s 0.
//
// It prints a table, or with -json one JSON object on stdout (the table on
// stderr); -csv writes the provider's record, one request a line.
package main
