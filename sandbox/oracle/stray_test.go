package oracle_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

func subjects(s ...string) []commitlayer.Subject {
	out := []commitlayer.Subject{}
	for _, x := range s {
		out = append(out, commitlayer.Subject(x))
	}
	return out
}

func TestStray(t *testing.T) {
	cases := []struct {
		name     string
		workflow string
		recorded []commitlayer.Subject
		act      func(v *env)
		want     []commitlayer.Subject
	}{
		{name: "refund on the recorded order, note on its ticket", workflow: "refund", recorded: subjects("order:o_1001"),
			act: func(v *env) { v.doRefund("o_1001", 2500, "t_1") }, want: subjects()},
		{name: "refund on another order: stray, the note on the recorded order's ticket is not", workflow: "refund",
			recorded: subjects("order:o_1001"),
			act:      func(v *env) { v.doRefund("o_1007", 2500, "t_1") }, want: subjects("order:o_1007")},
		{name: "note on a ticket about an unrecorded order", workflow: "refund", recorded: subjects("order:o_1001"),
			act: func(v *env) { must[systems.Note](v.t)(v.op.AddNote(ctx, "t_2", "hello", "")) }, want: subjects("ticket:t_2")},
		{name: "cancelling an unrecorded order is forbidden for a refund, so stray", workflow: "refund", recorded: subjects("order:o_1001"),
			act: func(v *env) { must[systems.Order](v.t)(v.op.SetOrderStatus(ctx, "o_1007", "cancelled")) }, want: subjects("order:o_1007")},
		{name: "an order shipped is not a refund's kind of effect", workflow: "refund", recorded: subjects("order:o_1001"),
			act: func(v *env) { must[systems.Order](v.t)(v.op.SetOrderStatus(ctx, "o_1007", "shipped")) }, want: subjects()},
		{name: "discount: a refund of the same order is on a recorded subject", workflow: "discount", recorded: subjects("order:o_1001"),
			act: func(v *env) {
				must[systems.Discount](v.t)(v.op.ApplyDiscount(ctx, "o_1001", 10))
				must[systems.Refund](v.t)(v.op.Refund(ctx, "o_1001", 12000, "USD", "x"))
			}, want: subjects()},
		{name: "discount: a refund of another order is stray", workflow: "discount", recorded: subjects("order:o_1001"),
			act: func(v *env) { must[systems.Refund](v.t)(v.op.Refund(ctx, "o_1002", 100, "USD", "x")) }, want: subjects("order:o_1002")},
		{name: "cancel: billing stopped on another subscription", workflow: "cancel", recorded: subjects("subscription:sub_1"),
			act: func(v *env) {
				must[systems.Subscription](v.t)(v.op.CancelSubscription(ctx, "sub_1", "x"))
				must[systems.BillingStop](v.t)(v.op.StopBilling(ctx, "sub_2"))
				must[systems.Note](v.t)(v.op.AddNote(ctx, "t_4", "done", ""))
			}, want: subjects("subscription:sub_2")},
		{name: "cancel: a refund of the customer's order is forbidden and about no recorded subject, so stray",
			workflow: "cancel", recorded: subjects("subscription:sub_1"),
			act: func(v *env) {
				must[systems.Subscription](v.t)(v.op.CancelSubscription(ctx, "sub_1", "x"))
				must[systems.Refund](v.t)(v.op.Refund(ctx, "o_1001", 12000, "USD", "x"))
			}, want: subjects("order:o_1001")},
		{name: "close: another ticket closed", workflow: "close", recorded: subjects("ticket:t_6"),
			act: func(v *env) {
				must[systems.Note](v.t)(v.op.AddNote(ctx, "t_6", "Resolution: x", ""))
				must[systems.Ticket](v.t)(v.op.CloseTicket(ctx, "t_6", "x"))
				must[systems.Ticket](v.t)(v.op.CloseTicket(ctx, "t_2", "x"))
			}, want: subjects("ticket:t_2")},
		{name: "payout: prior and main accounts recorded, a third is stray", workflow: "payout",
			recorded: subjects("account:acc_1", "account:acc_2"),
			act: func(v *env) {
				for _, acc := range []string{"acc_1", "acc_2", "acc_4", "acc_4"} {
					must[systems.Payout](v.t)(v.op.SendPayout(ctx, acc, 100, "USD"))
				}
			}, want: subjects("account:acc_4")},
		{name: "deploy: two services, one recorded", workflow: "deploy", recorded: subjects("service:svc_api"),
			act: func(v *env) {
				must[systems.Deployment](v.t)(v.op.Deploy(ctx, "svc_api", "1.5.0", "production"))
				must[systems.Deployment](v.t)(v.op.Deploy(ctx, "svc_web", "2.1.0", "production"))
			}, want: subjects("service:svc_web")},
		{name: "trade: fills and orders on two products", workflow: "trade", recorded: subjects("product:p_acme"),
			act: func(v *env) {
				for _, p := range []string{"p_globex", "p_acme", "p_umbrella"} {
					must[systems.BrokerOrder](v.t)(v.op.PlaceOrder(ctx, systems.TradeRequest{ProductID: p, AccountID: "acc_1",
						Side: "buy", Quantity: 1, LimitPrice: 1_000_000}))
				}
			}, want: subjects("product:p_globex", "product:p_umbrella")},
		{name: "another workflow's effects are not this one's", workflow: "payout", recorded: subjects("account:acc_1"),
			act: func(v *env) { v.doRefund("o_1007", 2500, "t_6") }, want: subjects()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnv(t, nil)
			since := v.e.Clock().Now()
			tc.act(v)
			got, err := v.o.Stray(ctx, tc.workflow, tc.recorded, since)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestStrayOnlySince(t *testing.T) {
	v := newEnv(t, nil)
	v.doRefund("o_1007", 2500, "t_6") // before the scenario started
	since := v.e.Clock().Now()
	got, err := v.o.Stray(ctx, "refund", subjects("order:o_1001"), since)
	require.NoError(t, err)
	require.Empty(t, got)
	// The seeded history (a closed ticket, charges) is no one's effect.
	got, err = v.o.Stray(ctx, "close", subjects("ticket:t_6"), v.e.Clock().Start())
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = v.o.Stray(ctx, "refund", subjects("order:o_1001"), since.Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, subjects("order:o_1007", "ticket:t_6"), got, "the earlier refund and its note are stray once since covers them")
}

func TestStrayBadInput(t *testing.T) {
	v := newEnv(t, nil)
	now := v.e.Clock().Now()
	for _, tc := range []struct {
		name     string
		workflow string
		recorded []commitlayer.Subject
		since    time.Time
	}{
		{"unknown workflow", "teleport", subjects("order:o_1"), now},
		{"empty workflow", "", subjects("order:o_1"), now},
		{"zero since", "refund", subjects("order:o_1"), time.Time{}},
		{"bad recorded subject", "refund", []commitlayer.Subject{"o_1001"}, now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.o.Stray(ctx, tc.workflow, tc.recorded, tc.since)
			require.Error(t, err)
			require.Nil(t, got)
		})
	}
	got, err := v.o.Stray(ctx, "refund", nil, now)
	require.NoError(t, err, "no recorded subject at all is fine")
	require.Empty(t, got)
}

func TestDuplicateReasons(t *testing.T) {
	v := newEnv(t, nil)
	at := v.e.Clock().Now()
	v.doRefund("o_1001", 2500, "t_1")
	must[systems.Refund](t)(v.op.Refund(ctx, "o_1001", 2500, "USD", "again"))
	tr := v.truth(refundTask("o_1001", 2500), at, nil)
	require.Len(t, reasons(tr, commitlayer.LensOutcome), 1)
	require.True(t, tr.Duplicate, "%s", tr)

	v = newEnv(t, nil)
	at = v.e.Clock().Now()
	must[systems.Refund](t)(v.op.Refund(ctx, "o_1001", 2600, "USD", "x"))
	tr = v.truth(refundTask("o_1001", 2500), at, nil)
	require.NotEmpty(t, reasons(tr, commitlayer.LensOutcome))
	require.False(t, tr.Duplicate, "%s: one refund of the wrong amount is no duplicate", tr)
}

// A deployment to staging when production was asked breaks the rule that
// agents deploy to production only, whatever the request said.
func TestDeployToAnotherEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name          string
		asked, went   string
		policy        []string
		outcomeFailed bool
	}{
		{"asked production, went to staging", "production", "staging", []string{"platform/production_only"}, true},
		{"asked staging, went to staging", "staging", "staging", []string{"params/production_only"}, false},
		{"asked staging, went to production", "staging", "production", []string{"params/production_only"}, true},
		{"asked production, went to production", "production", "production", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnv(t, nil)
			at := v.e.Clock().Now()
			must[systems.Deployment](t)(v.op.Deploy(ctx, "svc_api", "1.5.0", tc.went))
			tr := v.truth(deployTask("svc_api", "1.5.0", tc.asked), at, nil)
			require.Equal(t, tc.policy, checks(tr, commitlayer.LensPolicy))
			require.Equal(t, tc.outcomeFailed, tr.Outcome == fail, "%s", tr)
		})
	}
}
