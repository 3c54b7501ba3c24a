package metrics

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

func newHandler(t *testing.T) (*Handler, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	h, err := NewHandler(reg, Options{})
	require.NoError(t, err)
	return h, reg
}

// families gathers reg and indexes the families by name.
func families(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// find returns the metric of mf whose labels are exactly want.
func find(t *testing.T, mf *dto.MetricFamily, want map[string]string) *dto.Metric {
	t.Helper()
	require.NotNil(t, mf)
	for _, m := range mf.GetMetric() {
		got := labels(m)
		if len(got) != len(want) {
			continue
		}
		match := true
		for k, v := range want {
			if got[k] != v {
				match = false
			}
		}
		if match {
			return m
		}
	}
	require.Failf(t, "metric not found", "%s%v among %v", mf.GetName(), want, mf.GetMetric())
	return nil
}

func TestCounterVaryingTagSets(t *testing.T) {
	h, reg := newHandler(t)
	h.Counter("temporal_request").Inc(1)
	a := h.WithTags(map[string]string{"namespace": "default"})
	a.Counter("temporal_request").Inc(2)
	b := a.WithTags(map[string]string{"operation": "StartWorkflowExecution"})
	b.Counter("temporal_request").Inc(3)
	b.Counter("temporal_request").Inc(4)
	// Same keys given in another order land on the same series.
	c := h.WithTags(map[string]string{"operation": "StartWorkflowExecution", "namespace": "default"})
	c.Counter("temporal_request").Inc(5)

	mf := families(t, reg)["temporal_request"]
	require.Equal(t, dto.MetricType_COUNTER, mf.GetType())
	require.Len(t, mf.GetMetric(), 3)
	require.Equal(t, 1.0, find(t, mf, map[string]string{}).GetCounter().GetValue())
	require.Equal(t, 2.0, find(t, mf, map[string]string{"namespace": "default"}).GetCounter().GetValue())
	require.Equal(t, 12.0, find(t, mf, map[string]string{"namespace": "default", "operation": "StartWorkflowExecution"}).GetCounter().GetValue())
}

func TestCounterIgnoresNegative(t *testing.T) {
	h, reg := newHandler(t)
	h.Counter("c").Inc(5)
	h.Counter("c").Inc(-3)
	h.Counter("c").Inc(0)
	require.Equal(t, 5.0, find(t, families(t, reg)["c"], map[string]string{}).GetCounter().GetValue())
}

func TestWithTagsOverwritesAndDoesNotMutateParent(t *testing.T) {
	h, reg := newHandler(t)
	parent := h.WithTags(map[string]string{"task_queue": "a", "worker_type": "WorkflowWorker"})
	child := parent.WithTags(map[string]string{"task_queue": "b"})
	parent.Gauge("temporal_num_pollers").Update(2)
	child.Gauge("temporal_num_pollers").Update(7)

	mf := families(t, reg)["temporal_num_pollers"]
	require.Equal(t, dto.MetricType_GAUGE, mf.GetType())
	require.Len(t, mf.GetMetric(), 2)
	require.Equal(t, 2.0, find(t, mf, map[string]string{"task_queue": "a", "worker_type": "WorkflowWorker"}).GetGauge().GetValue())
	require.Equal(t, 7.0, find(t, mf, map[string]string{"task_queue": "b", "worker_type": "WorkflowWorker"}).GetGauge().GetValue())

	// A gauge is set, not added.
	child.Gauge("temporal_num_pollers").Update(3)
	mf = families(t, reg)["temporal_num_pollers"]
	require.Equal(t, 3.0, find(t, mf, map[string]string{"task_queue": "b", "worker_type": "WorkflowWorker"}).GetGauge().GetValue())
}

func TestTimerIsHistogramInSeconds(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := NewHandler(reg, Options{TimerBuckets: []float64{0.1, 1, 10}})
	require.NoError(t, err)
	tm := h.WithTags(map[string]string{"activity_type": "Extract"}).Timer("temporal_activity_execution_latency")
	tm.Record(50 * time.Millisecond)
	tm.Record(2 * time.Second)
	h.Timer("already_seconds").Record(time.Second)

	fams := families(t, reg)
	require.NotContains(t, fams, "temporal_activity_execution_latency")
	mf := fams["temporal_activity_execution_latency_seconds"]
	require.Equal(t, dto.MetricType_HISTOGRAM, mf.GetType())
	hist := find(t, mf, map[string]string{"activity_type": "Extract"}).GetHistogram()
	require.Equal(t, uint64(2), hist.GetSampleCount())
	require.InDelta(t, 2.05, hist.GetSampleSum(), 1e-9)
	require.Len(t, hist.GetBucket(), 3)
	require.Equal(t, uint64(1), hist.GetBucket()[0].GetCumulativeCount()) // ≤ 0.1 s
	require.Equal(t, uint64(1), hist.GetBucket()[1].GetCumulativeCount()) // ≤ 1 s
	require.Equal(t, uint64(2), hist.GetBucket()[2].GetCumulativeCount()) // ≤ 10 s
	require.Contains(t, fams, "already_seconds")
}

func TestKindConflictIsDroppedAndCounted(t *testing.T) {
	h, reg := newHandler(t)
	h.Counter("x").Inc(1)
	h.Gauge("x").Update(9) // same name, other kind: dropped
	h.WithTags(map[string]string{"a": "b"}).Gauge("x").Update(9)

	fams := families(t, reg) // Gather must not fail on mixed kinds
	require.Equal(t, dto.MetricType_COUNTER, fams["x"].GetType())
	require.Len(t, fams["x"].GetMetric(), 1)
	require.Equal(t, 2.0, find(t, fams["commitlayer_sdk_metric_conflicts_total"], map[string]string{"name": "x"}).GetCounter().GetValue())
}

func TestSanitizesNamesAndLabels(t *testing.T) {
	tests := []struct {
		name      string
		tags      map[string]string
		wantName  string
		wantLabel map[string]string
	}{
		{"temporal.request-count", map[string]string{"task-queue": "q"}, "temporal_request_count", map[string]string{"task_queue": "q"}},
		{"9lives", map[string]string{"9key": "v"}, "_lives", map[string]string{"_key": "v"}},
		{"ns:metric", map[string]string{"a:b": "v"}, "ns:metric", map[string]string{"a_b": "v"}},
		{"", map[string]string{"": "v"}, "_", map[string]string{"_": "v"}},
		{"reserved", map[string]string{"__name__": "v"}, "reserved", map[string]string{"tag__name__": "v"}},
		{"utf8", map[string]string{"k": "bad\xffvalue"}, "utf8", map[string]string{"k": "bad\uFFFDvalue"}},
		{"nonascii_é", map[string]string{"ключ": "v"}, "nonascii__", map[string]string{"tag____": "v"}},
	}
	for _, tc := range tests {
		t.Run(tc.wantName, func(t *testing.T) {
			h, reg := newHandler(t)
			h.WithTags(tc.tags).Counter(tc.name).Inc(1)
			mf := families(t, reg)[tc.wantName]
			require.NotNil(t, mf, "family %q", tc.wantName)
			require.Equal(t, 1.0, find(t, mf, tc.wantLabel).GetCounter().GetValue())
		})
	}
}

func TestCollidingTagKeysResolveDeterministically(t *testing.T) {
	for range 20 {
		h, reg := newHandler(t)
		h.WithTags(map[string]string{"a-b": "dash", "a_b": "under", "a.b": "dot"}).Counter("c").Inc(1)
		// Sorted keys: "a-b" < "a.b" < "a_b"; the last one wins.
		require.Equal(t, 1.0, find(t, families(t, reg)["c"], map[string]string{"a_b": "under"}).GetCounter().GetValue())
	}
}

func TestSecondHandlerOnSameRegistryFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := NewHandler(reg, Options{})
	require.NoError(t, err)
	_, err = NewHandler(reg, Options{})
	require.Error(t, err)
}

func TestConcurrentUse(t *testing.T) {
	h, reg := newHandler(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hh := h.WithTags(map[string]string{"worker": string(rune('a' + i%2))})
			for j := range 200 {
				if j%3 == 0 {
					hh = hh.WithTags(map[string]string{"extra": "x"})
				}
				hh.Counter("temporal_poller_start").Inc(1)
				hh.Timer("temporal_request_latency").Record(time.Millisecond)
				hh.Gauge("temporal_worker_task_slots_available").Update(float64(j))
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				_, err := reg.Gather()
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	mf := families(t, reg)["temporal_poller_start"]
	var total float64
	for _, m := range mf.GetMetric() {
		total += m.GetCounter().GetValue()
	}
	require.Equal(t, 8.0*200, total)
}

// TestTemporalSDKMetricsFlowThrough runs a workflow with a local activity in
// the SDK's test environment with the handler and checks that the SDK's own
// metrics (local activity counters and timers, tagged by the SDK) and a
// workflow's metrics reach the registry.
func TestTemporalSDKMetricsFlowThrough(t *testing.T) {
	h, reg := newHandler(t)
	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(h)
	env := s.NewTestWorkflowEnvironment()

	echo := func(_ context.Context, in string) (string, error) { return strings.ToUpper(in), nil }
	wf := func(ctx workflow.Context, in string) (string, error) {
		ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute})
		var out string
		if err := workflow.ExecuteLocalActivity(ctx, "Echo", in).Get(ctx, &out); err != nil {
			return "", err
		}
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"verdict": "PASS"}).Counter("commitlayer_verdicts").Inc(1)
		return out, nil
	}
	env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "EchoWorkflow"})
	env.RegisterActivityWithOptions(echo, activity.RegisterOptions{Name: "Echo"})
	env.ExecuteWorkflow("EchoWorkflow", "hi")
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out string
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, "HI", out)

	fams := families(t, reg)
	total := fams["temporal_local_activity_total"]
	require.NotNil(t, total, "families: %v", keys(fams))
	m := find(t, total, map[string]string{"activity_type": "Echo", "workflow_type": "EchoWorkflow"})
	require.Equal(t, 1.0, m.GetCounter().GetValue())

	lat := fams["temporal_local_activity_execution_latency_seconds"]
	require.NotNil(t, lat, "families: %v", keys(fams))
	require.Equal(t, uint64(1), find(t, lat, map[string]string{"activity_type": "Echo", "workflow_type": "EchoWorkflow"}).GetHistogram().GetSampleCount())

	verdicts := fams["commitlayer_verdicts"]
	require.NotNil(t, verdicts, "families: %v", keys(fams))
	require.Equal(t, 1.0, find(t, verdicts, map[string]string{"verdict": "PASS"}).GetCounter().GetValue())

	// The text exposition (what /metrics serves) lints and counts.
	c, err := testutil.GatherAndCount(reg, "temporal_local_activity_total")
	require.NoError(t, err)
	require.Equal(t, 1, c)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func BenchmarkCounterWithTags(b *testing.B) {
	h, err := NewHandler(prometheus.NewRegistry(), Options{})
	require.NoError(b, err)
	hh := h.WithTags(map[string]string{"namespace": "default", "task_queue": "verify", "workflow_type": "VerifyAction"})
	b.ReportAllocs()
	for b.Loop() {
		hh.Counter("temporal_workflow_completed").Inc(1)
	}
}
