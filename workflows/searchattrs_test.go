package workflows

import (
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
)

func TestVerifySearchAttributesAtStartFindTheVerificationBeforeItsVerdict(t *testing.T) {
	a := commitlayer.Action{Contract: "payout", Agent: "agent-1", Subject: "account:acc_1"}
	sa := VerifySearchAttributes("t_1", a, SAVerdict.ValueSet("extra"))
	require.Equal(t, 4, sa.Size())
	for key, want := range map[temporal.SearchAttributeKeyKeyword]string{
		SATenant: "t_1", SASubject: "account:acc_1", SAAgent: "agent-1", SAVerdict: "extra",
	} {
		got, ok := sa.GetKeyword(key)
		require.True(t, ok, key.GetName())
		require.Equal(t, want, got, key.GetName())
	}
	require.False(t, sa.ContainsKey(SAContract), "the contract comes with the first verdict")
	require.False(t, sa.ContainsKey(SAProvisional), "the provisional flag comes with the first verdict")
}

func TestVerifyUpsertsTheContractWithItsFirstVerdictOnly(t *testing.T) {
	_, env, in := newWorld(t, pass)
	a := commitlayer.Action{Contract: "payout", Agent: "agent-1", Subject: "account:acc_1"}
	require.NoError(t, env.SetTypedSearchAttributesOnStart(VerifySearchAttributes(in.TenantID, a)))
	var upserts []temporal.SearchAttributes
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		upserts = append(upserts, args.Get(0).(temporal.SearchAttributes))
	}).Return(nil)
	env.ExecuteWorkflow(VerifyAction, in)
	result(t, env)

	require.Len(t, upserts, 2, "one upsert per verdict: provisional, final")
	first, second := upserts[0], upserts[1]
	contract, ok := first.GetKeyword(SAContract)
	require.True(t, ok, "the first verdict's upsert carries the contract")
	require.Equal(t, "payout", contract)
	verdict, _ := first.GetKeyword(SAVerdict)
	require.Equal(t, "PASS", verdict)
	provisional, ok := first.GetBool(SAProvisional)
	require.True(t, ok)
	require.True(t, provisional)
	require.False(t, second.ContainsKey(SAContract), "the contract was upserted again")
	provisional, _ = second.GetBool(SAProvisional)
	require.False(t, provisional)
}

func TestVerifyStartedWithItsContractDoesNotUpsertItAgain(t *testing.T) {
	_, env, in := newWorld(t, pass)
	// A run started before (five attributes at the start).
	require.NoError(t, env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(
		SATenant.ValueSet(in.TenantID), SAContract.ValueSet("payout"), SAProvisional.ValueSet(true))))
	var upserts []temporal.SearchAttributes
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		upserts = append(upserts, args.Get(0).(temporal.SearchAttributes))
	}).Return(nil)
	env.ExecuteWorkflow(VerifyAction, in)
	result(t, env)
	require.NotEmpty(t, upserts)
	for _, u := range upserts {
		require.Equal(t, 2, u.Size(), "verdict and provisional flag only")
	}
}
