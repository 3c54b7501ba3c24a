package harness_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/sandbox/benchstore/benchstoretest"
	sbcontracts "github.com/commitlayer/commitlayer/sandbox/contracts"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/service"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type noRecheck struct{}

func (noRecheck) Recheck(context.Context, string, string) (commitlayer.Verdict, error) {
	return commitlayer.Verdict{}, errors.New("no verifications in this test")
}

// TestActivitiesStepsOfOneScenario runs the harness's activities for one
// scenario outside any workflow, on the real store: a retried Prepare
// answers the same enterprise and tenant, the agent's action is recorded
// through the API's path, the row is built, and cleanup releases all.
func TestActivitiesStepsOfOneScenario(t *testing.T) {
	d := benchstoretest.Store(t)
	acts := &harness.Activities{
		Store: d, Recorder: service.NewActions(d, service.NewContracts(d, 0), nil, nil, nil), Rechecker: noRecheck{},
		Contracts: sbcontracts.FS, Dir: t.TempDir(), TaskQueue: "local-q", Host: &harness.Host{},
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	run := "test-" + time.Now().UTC().Format("150405.000000")

	do := func(fn, in, out any) error {
		val, err := env.ExecuteActivity(fn, in)
		if err != nil {
			return err
		}
		if out != nil {
			return val.Get(out)
		}
		return nil
	}
	var prep, again harness.PrepareResult
	require.NoError(t, do(acts.Prepare, harness.PrepareInput{RunID: run, ScenarioID: "payout/baseline"}, &prep))
	require.NoError(t, do(acts.Prepare, harness.PrepareInput{RunID: run, ScenarioID: "payout/baseline"}, &again))
	require.Equal(t, prep, again, "a retried Prepare builds nothing new")
	require.Equal(t, "local-q", prep.TaskQueue)
	require.Equal(t, "send_payout", prep.ContractID)
	require.NotNil(t, acts.Host.ExtractTransport(prep.TenantID), "connector pulls go through the scenario's chaos")
	conns, err := d.ListConnectors(context.Background(), prep.TenantID)
	require.NoError(t, err)
	require.Len(t, conns, 7)

	step := harness.StepInput{RunID: run, ScenarioID: "payout/baseline", TenantID: prep.TenantID}
	var prior []harness.Recorded
	require.NoError(t, do(acts.RunPrior, step, &prior))
	require.Empty(t, prior)
	var res harness.AgentResult
	require.NoError(t, do(acts.RunAgent, step, &res))
	require.Equal(t, "success", res.Claim)
	rec, err := d.GetAction(context.Background(), prep.TenantID, res.Recorded.Action.ID)
	require.NoError(t, err)
	require.Equal(t, commitlayer.Subject("account:acc_1"), rec.Subject)
	require.Equal(t, 1, rec.ContractVersion, "recorded through the API path: the contract version is pinned")
	require.Equal(t, rec.RequestedAt.Add(10*time.Minute), rec.SettlesAt)

	// No injection after settlement in a baseline: nothing to re-check.
	val, err := env.ExecuteActivity(acts.AfterSettlement, harness.RecheckInput{RunID: run, ScenarioID: "payout/baseline",
		TenantID: prep.TenantID, ActionID: rec.ID})
	require.NoError(t, err)
	require.False(t, val.HasValue(), "no verdict: nothing was re-checked")

	// Judge reads the verdicts from the store, as VerifyAction leaves them.
	var row matrix.Row
	require.Error(t, do(acts.Score, harness.ScoreInput{StepInput: step, ContractID: prep.ContractID, Since: prep.Since,
		ActionID: rec.ID, Claim: res.Claim, Calls: res.Calls}, &row), "no final verdict stored yet")
	final := commitlayer.Verdict{ActionID: rec.ID, Status: commitlayer.StatusPass,
		Lenses:      commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass},
		EvaluatedAt: time.Now()}
	provisional := final
	provisional.Provisional = true
	for _, v := range []commitlayer.Verdict{provisional, final} {
		_, _, err := d.AppendVerdict(context.Background(), prep.TenantID, v)
		require.NoError(t, err)
	}
	require.NoError(t, do(acts.Score, harness.ScoreInput{StepInput: step, ContractID: prep.ContractID, Since: prep.Since,
		ActionID: rec.ID, Claim: res.Claim, Calls: res.Calls}, &row))
	require.Equal(t, 2, row.Verdict.Versions)
	require.Equal(t, "payout/baseline", row.ID)
	require.True(t, row.Agree.Both(), "%+v", row.Truth)
	require.Empty(t, row.Orphans)

	require.NoError(t, do(acts.Cleanup, step, nil))
	require.NoError(t, do(acts.Cleanup, step, nil), "cleaning up twice is fine")
	require.Nil(t, acts.Host.ExtractTransport(prep.TenantID))
	err = do(acts.RunAgent, step, nil)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.True(t, appErr.NonRetryable())
	require.Equal(t, "ScenarioLost", appErr.Type())

	// The run's tenant goes with its purge.
	n, err := d.PurgeBenchmarkTenants(context.Background(), run)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestPrepareRejectsUnknownScenario(t *testing.T) {
	acts := &harness.Activities{Contracts: sbcontracts.FS, Host: &harness.Host{}}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	_, err := env.ExecuteActivity(acts.Prepare, harness.PrepareInput{RunID: "r", ScenarioID: "refund/nope"})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.True(t, appErr.NonRetryable())
}
