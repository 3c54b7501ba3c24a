package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

func TestSelectScenariosByPayments(t *testing.T) {
	refunds, err := catalogue.Select([]string{"refund/"})
	require.NoError(t, err)
	all, err := catalogue.Select(nil)
	require.NoError(t, err)
	tests := []struct {
		name     string
		payments string
		only     []string
		want     int
		field    string // non-empty: a field error on it
	}{
		{"sandbox by default: everything", "", nil, len(all), ""},
		{"sandbox by name", "sandbox", []string{"payout/"}, -1, ""},
		{"stripe-fake: refund scenarios only", "stripe-fake", nil, len(refunds), ""},
		{"stripe with refund/", "stripe", []string{"refund/"}, len(refunds), ""},
		{"stripe-fake with one refund scenario", "stripe-fake", []string{"refund/retried_twice"}, 1, ""},
		{"unknown backend", "paypal", nil, 0, "payments"},
		{"a key is not a backend", "sk_test_abc", nil, 0, "payments"},
		{"stripe-fake with a payout", "stripe-fake", []string{"refund/", "payout/baseline"}, 0, "only"},
		{"stripe with every workflow", "stripe", []string{"cancel/"}, 0, "only"},
		{"stripe-fake with an unknown id", "stripe-fake", []string{"refund/nope"}, 0, "only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name, scs, err := SelectScenarios(tc.payments, tc.only)
			if tc.field != "" {
				var fe *commitlayer.FieldError
				require.True(t, errors.As(err, &fe), "want a field error (the API answers 422), got %v", err)
				require.Equal(t, tc.field, fe.Field)
				return
			}
			require.NoError(t, err)
			require.Contains(t, stripepay.Names, name)
			if tc.want >= 0 {
				require.Len(t, scs, tc.want)
			}
			if name != stripepay.NameSandbox {
				for _, sc := range scs {
					require.Equal(t, "refund", sc.Process, sc.ID)
				}
			}
		})
	}
}

func TestStartRejectsBadPaymentsBeforeTouchingAnything(t *testing.T) {
	r := &Runner{} // no store, no Temporal client
	for _, req := range []Request{
		{Payments: "paypal"},
		{Payments: "stripe-fake", Only: []string{"discount/"}},
	} {
		_, err := r.Start(context.Background(), req)
		var fe *commitlayer.FieldError
		require.True(t, errors.As(err, &fe), "want a field error, got %v", err)
	}
}

// fakeRuns stores runs in memory.
type fakeRuns struct{ runs []benchstore.Run }

func (f *fakeRuns) CreateBenchmarkRun(_ context.Context, r benchstore.Run) (benchstore.Run, error) {
	f.runs = append(f.runs, r)
	return r, nil
}
func (f *fakeRuns) GetBenchmarkRun(context.Context, string) (benchstore.Run, error) {
	return benchstore.Run{}, commitlayer.ErrNotFound
}
func (f *fakeRuns) UpdateBenchmarkRun(context.Context, benchstore.Run) error { return nil }

// startOnly is a Temporal client that records the workflow it is asked to
// start; nothing else is used.
type startOnly struct {
	client.Client
	args []any
}

func (s *startOnly) ExecuteWorkflow(_ context.Context, _ client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	s.args = args
	return nil, nil
}

// TestStripeKeyNeverInRequestOrWorkflowInputs starts a stripe run with the
// key in this process's environment and follows the backend's name down:
// the stored run request, the Benchmark input, the Scenario children's
// inputs and the Prepare activity's input carry "stripe", never the key.
func TestStripeKeyNeverInRequestOrWorkflowInputs(t *testing.T) {
	const key = "sk_test_51KeyThatMustNeverTravelAnywhere0123456789"
	t.Setenv(stripepay.EnvKey, key)
	store, tc := &fakeRuns{}, &startOnly{}
	r := &Runner{Temporal: tc, Store: store}
	reqJSON := `{"payments":"stripe","only":["refund/"]}`
	var req Request
	require.NoError(t, json.Unmarshal([]byte(reqJSON), &req))
	started, err := r.StartRun(context.Background(), req)
	require.NoError(t, err)
	require.NotEmpty(t, started.Scenarios)

	seen := []string{reqJSON, string(store.runs[0].Request)}
	require.Contains(t, string(store.runs[0].Request), `"payments":"stripe"`)
	require.Len(t, tc.args, 1)
	in, ok := tc.args[0].(BenchmarkInput)
	require.True(t, ok)
	require.Equal(t, stripepay.NameStripe, in.Payments)
	seen = append(seen, payloads(t, in))

	// The Benchmark hands the name to each Scenario, which hands it to
	// Prepare.
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	harness.Register(env, &harness.Activities{})
	env.RegisterWorkflow(Scenario)
	var children []ScenarioInput
	env.OnWorkflow(Scenario, mock.Anything, mock.Anything).Return(func(_ workflow.Context, sin ScenarioInput) (matrix.Row, error) {
		children = append(children, sin)
		return matrix.Row{ID: sin.ScenarioID}, nil
	})
	env.OnActivity(harnessActs.RecordRun, mock.Anything, mock.Anything).Return(matrix.Summary{}, nil)
	env.ExecuteWorkflow(Benchmark, in)
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, children, len(started.Scenarios))
	for _, c := range children {
		require.Equal(t, stripepay.NameStripe, c.Payments)
		seen = append(seen, payloads(t, c))
	}

	senv := suite.NewTestWorkflowEnvironment()
	harness.Register(senv, &harness.Activities{})
	var prep harness.PrepareInput
	senv.OnActivity(harnessActs.Prepare, mock.Anything, mock.Anything).Return(func(_ context.Context, p harness.PrepareInput) (harness.PrepareResult, error) {
		prep = p
		return harness.PrepareResult{}, errors.New("stop here")
	})
	senv.ExecuteWorkflow(Scenario, children[0])
	require.Error(t, senv.GetWorkflowError())
	require.Equal(t, stripepay.NameStripe, prep.Payments)
	seen = append(seen, payloads(t, prep))

	for _, s := range seen {
		require.Contains(t, s, `"stripe"`, "the name travels")
		require.NotContains(t, s, key)
		require.NotContains(t, s, "sk_test_")
	}
}

// payloads is v as Temporal stores it in history.
func payloads(t *testing.T, v any) string {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	require.NoError(t, err)
	var b strings.Builder
	for _, pl := range p.Payloads {
		b.Write(pl.Data)
	}
	return b.String()
}
