// Command goodput is the side-by-side proof: one seeded workload — a
// long-tailed nightly batch and an interactive stream beside it — against
// one fake-provider quota, run through each strategy in turn, for OpenAI's
// and Anthropic's accounting and for a provider that enforces its
// per-minute limits in 5 s buckets or in full-minute ones.
//
// Strategies:
//
//   - naive: the official SDKs with their default retries (two) inside
//     Temporal's default retry policy;
//   - temporal-rate: the activities package's activities with the task
//     queue's TaskQueueActivitiesPerSecond at RPM/60;
//   - requests-only: a client-side RPM limiter (x/time/rate, no burst) with
//     random exponential backoff on a 429;
//   - cookbook: the OpenAI cookbook's parallel processor — x/time/rate on
//     every per-minute limit at 100 % (whole-minute buckets), each call
//     waiting for its estimated tokens, every call paused for the
//     provider's retry-after after a 429;
//   - tollgate: the tollgate plugin on a memory store, the limits set and
//     every other option at its default;
//   - tollgate-redis: the same in four worker processes (the program
//     re-executed with a hidden -worker flag) sharing a Redis store.
//
// Three more, run only when -strategies names them, measure what
// configuring the limits costs or saves: tollgate-reported (no limits
// configured: one call at a time until the first answer, then the limits
// the provider reports), tollgate-low (limits configured at half the
// provider's) and tollgate-high (at twice the provider's).
//
// Every call is a real Temporal activity on a dev server the program
// starts, through the official SDKs to the testsuite's fake provider over
// HTTP. Each run has a fresh fake provider, task queue and Redis prefix.
// The limits are planned from the workload so that the provider's
// theoretical minimum drain is about -target (Plan).
//
// The figures come from the fake provider's record (package figures):
//
//   - drain: from the first batch request's arrival to the last batch
//     call's completion (the interactive stream starts after the batch's
//     first request);
//   - theoretical minimum: for each per-minute dimension d the provider
//     limits, max(0, charged_d − bucket_d) / rate_d, where charged_d sums
//     what the admitted requests (batch and interactive) that arrived
//     before the drain's end were charged; the binding dimension is the
//     one with the largest; drain_ratio = drain / minimum;
//   - utilization: charged in the binding dimension / (bucket + rate ×
//     drain);
//   - left, answer and filled (the table only): drain − minimum split at
//     the batch call answered last (figures.Tail); the batch's requests
//     carry testsuite.TagHeader so the record tells them apart;
//   - provider_requests and provider_429s: the provider's own count;
//   - interactive_p99_s: the 99th percentile (nearest rank) of the
//     interactive calls' latency, from the workflow scheduling the
//     activity to seeing it complete.
//
// It prints a table (the JSON lines with -json), and writes a
// self-contained HTML chart of each run's binding level and requests in
// flight over time (-html).
package main
