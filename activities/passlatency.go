package activities

import (
	"context"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"
)

// MetricPassLatency is the histogram of verification passes as the worker
// measures them: from the pass's start (its pull, when it pulls) to its
// verdict being stored, commit included. On /metrics it is
// commitlayer_verify_pass_latency_seconds, labelled pulled="true" for passes
// that pulled the connectors first or waited for a pull they shared (a pass
// whose pull was skipped, covered by an earlier one, is pulled="false"). The verdict row keeps the same figure up
// to its insert (commitlayer.Verdict.PassLatency).
const MetricPassLatency = "commitlayer_verify_pass_latency"

// recordPassLatency records one pass in the worker's metrics (the SDK's
// handler: the Prometheus one on a worker with -metrics-addr, a no-op
// otherwise). Outside an activity it does nothing.
func recordPassLatency(ctx context.Context, d time.Duration, pulled bool) {
	if !activity.IsActivity(ctx) {
		return
	}
	activity.GetMetricsHandler(ctx).
		WithTags(map[string]string{"pulled": strconv.FormatBool(pulled)}).
		Timer(MetricPassLatency).Record(d)
}

// MetricPullLatency is the histogram of the pulls inside passes (every
// connector of the tenant, in parallel, each page stored): the share of
// MetricPassLatency spent pulling. On /metrics:
// commitlayer_verify_pull_latency_seconds.
const MetricPullLatency = "commitlayer_verify_pull_latency"

func recordPullLatency(ctx context.Context, d time.Duration) {
	if !activity.IsActivity(ctx) {
		return
	}
	activity.GetMetricsHandler(ctx).Timer(MetricPullLatency).Record(d)
}
