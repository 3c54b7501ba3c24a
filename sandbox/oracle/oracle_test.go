package oracle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/oracle"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

const (
	pass = commitlayer.StatusPass
	fail = commitlayer.StatusFail
	unk  = commitlayer.StatusUnknown
)

type env struct {
	t  *testing.T
	e  *sandbox.Enterprise
	op *sandbox.Operator
	o  *oracle.Oracle
}

func newEnv(t *testing.T, edit func(*sandbox.Seed)) *env {
	t.Helper()
	seed := sandbox.DefaultSeed()
	if edit != nil {
		edit(&seed)
	}
	e, err := sandbox.New(context.Background(), t.TempDir(), sandbox.Options{Seed: &seed})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	o, err := oracle.Open(e.DBPath)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, o.Close()) })
	return &env{t: t, e: e, op: e.Operator(), o: o}
}

func (v *env) truth(task agent.Task, at time.Time, down []string, prior ...oracle.Action) matrix.Truth {
	v.t.Helper()
	tr, err := v.o.Truth(context.Background(), oracle.Input{Action: oracle.Action{Task: task, RequestedAt: at}, Down: down, Prior: prior})
	require.NoError(v.t, err)
	return tr
}

func expect(t *testing.T, tr matrix.Truth, outcome, policy commitlayer.Status) {
	t.Helper()
	require.Equal(t, outcome, tr.Expected(commitlayer.LensOutcome), "outcome: %s", tr)
	require.Equal(t, policy, tr.Expected(commitlayer.LensPolicy), "policy: %s", tr)
}

// reasons are the truth's reasons on a lens, each "system check:
// message".
func reasons(tr matrix.Truth, lens commitlayer.Lens) []string {
	var out []string
	for _, r := range tr.Reasons {
		if rest, ok := strings.CutPrefix(r, string(lens)+" "); ok {
			out = append(out, rest)
		}
	}
	return out
}

// checks are the truth's reasons on a lens as "system/check".
func checks(tr matrix.Truth, lens commitlayer.Lens) []string {
	var out []string
	for _, r := range reasons(tr, lens) {
		head, _, _ := strings.Cut(r, ":")
		system, check, _ := strings.Cut(head, " ")
		out = append(out, system+"/"+check)
	}
	return out
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}

var ctx = context.Background()

func refundTask(order string, amount int64) agent.Task {
	return agent.Task{Process: "refund", Subject: commitlayer.Subject("order:" + order), AgentID: "a1", TicketID: "t_1",
		Params: commitlayer.Attrs{"amount": amount, "currency": "USD", "ticket_id": "t_1"}}
}

// doRefund does what a correct agent does for a refund.
func (v *env) doRefund(order string, amount int64, ticket string) systems.Refund {
	r := must[systems.Refund](v.t)(v.op.Refund(ctx, order, amount, "USD", "requested_by_customer"))
	must[systems.Order](v.t)(v.op.SetOrderStatus(ctx, order, "refunded"))
	must[systems.Note](v.t)(v.op.AddNote(ctx, ticket, "Refunded.", ""))
	return r
}

func TestRefund(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		v.doRefund("o_1001", 2500, "t_1")
		tr := v.truth(refundTask("o_1001", 2500), at, nil)
		expect(t, tr, pass, pass)
		require.True(t, tr.Knowable)
	})
	t.Run("nothing happened names every missing effect", func(t *testing.T) {
		v := newEnv(t, nil)
		tr := v.truth(refundTask("o_1001", 2500), v.e.Clock().Now(), nil)
		expect(t, tr, fail, pass)
		require.Equal(t, []string{"payments/refund", "orders/order_refunded", "tickets/customer_notified"}, checks(tr, commitlayer.LensOutcome))
	})
	t.Run("earlier effects do not count", func(t *testing.T) {
		v := newEnv(t, nil)
		v.doRefund("o_1001", 2500, "t_1")
		tr := v.truth(refundTask("o_1001", 2500), v.e.Clock().Now(), nil)
		require.Equal(t, fail, tr.Outcome)
	})
	t.Run("duplicate", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Refund](t)(v.op.Refund(ctx, "o_1001", 2500, "USD", "human"))
		v.doRefund("o_1001", 2500, "t_1")
		tr := v.truth(refundTask("o_1001", 2500), at, nil)
		expect(t, tr, fail, pass)
		require.Equal(t, []string{"payments/refund"}, checks(tr, commitlayer.LensOutcome))
		require.Contains(t, reasons(tr, commitlayer.LensOutcome)[0], "2 refunds")
	})
	t.Run("amount differs", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		v.doRefund("o_1001", 2400, "t_1")
		tr := v.truth(refundTask("o_1001", 2500), at, nil)
		expect(t, tr, fail, pass)
		require.Contains(t, reasons(tr, commitlayer.LensOutcome)[0], "2400")
	})
	t.Run("reversed after settlement", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		r := v.doRefund("o_1001", 2500, "t_1")
		must[systems.Refund](t)(v.op.ReverseRefund(ctx, r.ID))
		tr := v.truth(refundTask("o_1001", 2500), at, nil)
		expect(t, tr, fail, pass)
		require.Contains(t, reasons(tr, commitlayer.LensOutcome)[0], "reversed")
	})
	t.Run("over limit is a policy failure the request shows", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		v.doRefund("o_1006", 60000, "t_7")
		task := refundTask("o_1006", 60000)
		tr := v.truth(task, at, nil)
		expect(t, tr, pass, fail) // the refund happened as asked; it was not allowed
		require.Equal(t, []string{"params/within_limit"}, checks(tr, commitlayer.LensPolicy))
		// Orders down: the limit breach is still known from the request.
		tr = v.truth(task, at, []string{"orders"})
		require.Equal(t, fail, tr.Expected(commitlayer.LensPolicy))
	})
	t.Run("ineligible, judged on the state before the action", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		// o_1003 is pending; the agent forces a status and a note anyway.
		must[systems.Order](t)(v.op.SetOrderStatus(ctx, "o_1003", "paid"))
		tr := v.truth(refundTask("o_1003", 1000), at, nil)
		require.Equal(t, []string{"orders/eligible"}, checks(tr, commitlayer.LensPolicy))
		require.Contains(t, reasons(tr, commitlayer.LensPolicy)[0], "pending")
		// With orders down the eligibility is unknowable.
		tr = v.truth(refundTask("o_1003", 1000), at, []string{"orders"})
		require.Equal(t, unk, tr.Expected(commitlayer.LensPolicy))
	})
	t.Run("a status change after the action does not change eligibility", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		v.doRefund("o_1002", 1000, "t_2") // o_1002 was shipped; now refunded
		tr := v.truth(refundTask("o_1002", 1000), at, nil)
		require.Equal(t, pass, tr.Policy, "%s", tr)
	})
	t.Run("forbidden cancellation", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		v.doRefund("o_1001", 2500, "t_1")
		must[systems.Order](t)(v.op.SetOrderStatus(ctx, "o_1001", "cancelled"))
		tr := v.truth(refundTask("o_1001", 2500), at, nil)
		expect(t, tr, pass, fail)
		require.Equal(t, []string{"orders/no_cancellation"}, checks(tr, commitlayer.LensPolicy))
	})
	t.Run("unknowable when a needed system is down", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		v.doRefund("o_1001", 2500, "t_1")
		tr := v.truth(refundTask("o_1001", 2500), at, []string{"payments"})
		expect(t, tr, unk, pass)
		require.False(t, tr.OutcomeKnowable)
		require.Equal(t, pass, tr.Outcome, "the truth itself is still PASS")
		// A system no lens needs being down changes nothing.
		expect(t, v.truth(refundTask("o_1001", 2500), at, []string{"broker"}), pass, pass)
	})
	t.Run("a failure shown by a reachable system is knowable", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Refund](t)(v.op.Refund(ctx, "o_1001", 2500, "USD", ""))
		// Not marked refunded, no note: orders and tickets show the failure.
		tr := v.truth(refundTask("o_1001", 2500), at, []string{"payments"})
		expect(t, tr, fail, pass)
		// Only payments shows it and payments is down: unknowable.
		must[systems.Order](t)(v.op.SetOrderStatus(ctx, "o_1001", "refunded"))
		must[systems.Note](t)(v.op.AddNote(ctx, "t_1", "done", ""))
		must[systems.Refund](t)(v.op.Refund(ctx, "o_1001", 2500, "USD", ""))
		tr = v.truth(refundTask("o_1001", 2500), at, []string{"payments"})
		require.Equal(t, fail, tr.Outcome)
		require.Equal(t, unk, tr.Expected(commitlayer.LensOutcome))
	})
	t.Run("unknown order", func(t *testing.T) {
		v := newEnv(t, nil)
		tr := v.truth(refundTask("o_9999", 100), v.e.Clock().Now(), nil)
		expect(t, tr, fail, fail)
	})
}

func TestCancel(t *testing.T) {
	task := func(sub string) agent.Task {
		return agent.Task{Process: "cancel", Subject: commitlayer.Subject("subscription:" + sub), AgentID: "a1", TicketID: "t_4"}
	}
	do := func(v *env, sub, ticket string) {
		must[systems.Subscription](v.t)(v.op.CancelSubscription(ctx, sub, "asked"))
		must[systems.BillingStop](v.t)(v.op.StopBilling(ctx, sub))
		must[systems.Note](v.t)(v.op.AddNote(ctx, ticket, "Cancelled.", ""))
	}
	t.Run("clean", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		do(v, "sub_1", "t_4")
		expect(t, v.truth(task("sub_1"), at, nil), pass, pass)
	})
	t.Run("billing not stopped", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Subscription](t)(v.op.CancelSubscription(ctx, "sub_1", ""))
		must[systems.Note](t)(v.op.AddNote(ctx, "t_4", "Cancelled.", ""))
		tr := v.truth(task("sub_1"), at, nil)
		require.Equal(t, []string{"payments/billing_stopped"}, checks(tr, commitlayer.LensOutcome))
	})
	t.Run("already cancelled", func(t *testing.T) {
		v := newEnv(t, func(s *sandbox.Seed) {
			s.Tickets = append(s.Tickets, systems.Ticket{ID: "t_9", CustomerID: "c_3", About: "subscription:sub_3",
				Status: "open", SubjectLine: "x", Body: "cancel"})
		})
		tr := v.truth(task("sub_3"), v.e.Clock().Now(), nil)
		require.Equal(t, []string{"crm/active"}, checks(tr, commitlayer.LensPolicy))
	})
	t.Run("refund to the customer is forbidden", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		do(v, "sub_1", "t_4")
		must[systems.Refund](t)(v.op.Refund(ctx, "o_1001", 4900, "USD", "goodwill"))
		tr := v.truth(task("sub_1"), at, nil)
		expect(t, tr, pass, fail)
		require.Equal(t, []string{"payments/no_refund"}, checks(tr, commitlayer.LensPolicy))
		tr = v.truth(task("sub_1"), at, []string{"payments"})
		require.Equal(t, unk, tr.Expected(commitlayer.LensPolicy), "only payments shows it")
	})
}

func TestAddressAndDiscount(t *testing.T) {
	addr := func(order string) agent.Task {
		return agent.Task{Process: "address", Subject: commitlayer.Subject("order:" + order), AgentID: "a1",
			Params: commitlayer.Attrs{"address": "7 Harbor Road"}}
	}
	t.Run("address clean", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Order](t)(v.op.ChangeAddress(ctx, "o_1003", "7 Harbor Road"))
		must[systems.Note](t)(v.op.AddNote(ctx, "t_3", "Changed.", ""))
		expect(t, v.truth(addr("o_1003"), at, nil), pass, pass)
	})
	t.Run("address of a shipped order, changed twice, one differs", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Order](t)(v.op.ChangeAddress(ctx, "o_1002", "7 Harbor Road"))
		must[systems.Order](t)(v.op.ChangeAddress(ctx, "o_1002", "8 Harbor Road"))
		tr := v.truth(addr("o_1002"), at, nil)
		require.Equal(t, []string{"orders/not_shipped"}, checks(tr, commitlayer.LensPolicy))
		require.Equal(t, []string{"orders/address_changed", "orders/address_changed", "tickets/customer_notified"}, checks(tr, commitlayer.LensOutcome))
	})
	disc := func(order string, pct int64) agent.Task {
		return agent.Task{Process: "discount", Subject: commitlayer.Subject("order:" + order), AgentID: "a1",
			Params: commitlayer.Attrs{"percent": pct}}
	}
	t.Run("discount clean for gold", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Discount](t)(v.op.ApplyDiscount(ctx, "o_1001", 10))
		must[systems.Note](t)(v.op.AddNote(ctx, "t_1", "Discounted.", ""))
		expect(t, v.truth(disc("o_1001", 10), at, nil), pass, pass)
	})
	t.Run("discount for bronze, over 20, with a refund", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Discount](t)(v.op.ApplyDiscount(ctx, "o_1008", 30))
		must[systems.Refund](t)(v.op.Refund(ctx, "o_1008", 100, "USD", ""))
		tr := v.truth(disc("o_1008", 30), at, nil)
		require.ElementsMatch(t, []string{"params/within_limit", "crm/customer_tier", "payments/no_refund"}, checks(tr, commitlayer.LensPolicy))
		require.Equal(t, []string{"tickets/customer_notified"}, checks(tr, commitlayer.LensOutcome), "no ticket about o_1008")
		tr = v.truth(disc("o_1008", 30), at, []string{"crm", "payments", "orders", "tickets"})
		require.Equal(t, fail, tr.Expected(commitlayer.LensPolicy), "params show the breach")
		require.Equal(t, unk, tr.Expected(commitlayer.LensOutcome))
	})
}

func TestClose(t *testing.T) {
	task := func(ticket string) agent.Task {
		return agent.Task{Process: "close", Subject: commitlayer.Subject("ticket:" + ticket), AgentID: "a1",
			Params: commitlayer.Attrs{"resolution": "Invoice reissued."}}
	}
	t.Run("clean", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Note](t)(v.op.AddNote(ctx, "t_6", "Resolution: Invoice reissued.", ""))
		must[systems.Ticket](t)(v.op.CloseTicket(ctx, "t_6", "Invoice reissued."))
		expect(t, v.truth(task("t_6"), at, nil), pass, pass)
	})
	t.Run("other resolution, no note", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Ticket](t)(v.op.CloseTicket(ctx, "t_6", "Nothing to do."))
		tr := v.truth(task("t_6"), at, nil)
		require.Equal(t, []string{"tickets/resolution_note", "tickets/closed"}, checks(tr, commitlayer.LensOutcome))
	})
	t.Run("already closed", func(t *testing.T) {
		v := newEnv(t, nil)
		tr := v.truth(task("t_5"), v.e.Clock().Now(), []string{"tickets"})
		require.Equal(t, fail, tr.Policy)
		require.Equal(t, unk, tr.Expected(commitlayer.LensPolicy))
	})
}

func payoutTask(agentID, acc string, amount int64) agent.Task {
	return agent.Task{Process: "payout", Subject: commitlayer.Subject("account:" + acc), AgentID: agentID,
		Params: commitlayer.Attrs{"amount": amount, "currency": "USD"}}
}

func TestPayout(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Payout](t)(v.op.SendPayout(ctx, "acc_1", 120000, "USD"))
		expect(t, v.truth(payoutTask("a1", "acc_1", 120000), at, nil), pass, pass)
	})
	t.Run("returned after settlement", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		p := must[systems.Payout](t)(v.op.SendPayout(ctx, "acc_1", 120000, "USD"))
		must[systems.Payout](t)(v.op.ReturnPayout(ctx, p.ID, "account closed"))
		tr := v.truth(payoutTask("a1", "acc_1", 120000), at, nil)
		expect(t, tr, fail, pass)
		require.Contains(t, reasons(tr, commitlayer.LensOutcome)[0], "returned")
	})
	t.Run("frozen account", func(t *testing.T) {
		v := newEnv(t, nil)
		tr := v.truth(payoutTask("a1", "acc_3", 1000), v.e.Clock().Now(), nil)
		expect(t, tr, fail, fail)
		require.Equal(t, []string{"ledger/account_active"}, checks(tr, commitlayer.LensPolicy))
	})
	t.Run("daily total over this agent's earlier payouts", func(t *testing.T) {
		v := newEnv(t, nil)
		var prior []oracle.Action
		for _, acc := range []string{"acc_1", "acc_2"} {
			at := v.e.Clock().Now()
			must[systems.Payout](t)(v.op.SendPayout(ctx, acc, 200000, "USD"))
			prior = append(prior, oracle.Action{Task: payoutTask("a1", acc, 200000), RequestedAt: at})
		}
		// Another agent's payout in between does not count for a1.
		at := v.e.Clock().Now()
		must[systems.Payout](t)(v.op.SendPayout(ctx, "acc_4", 400000, "USD"))
		prior = append(prior, oracle.Action{Task: payoutTask("a2", "acc_4", 400000), RequestedAt: at})

		at = v.e.Clock().Now()
		must[systems.Payout](t)(v.op.SendPayout(ctx, "acc_1", 100000, "USD"))
		tr := v.truth(payoutTask("a1", "acc_1", 100000), at, nil, prior...)
		expect(t, tr, pass, pass) // 200000 + 200000 + 100000 = 500000: at the limit

		at = v.e.Clock().Now()
		must[systems.Payout](t)(v.op.SendPayout(ctx, "acc_2", 1, "USD"))
		prior = append(prior, oracle.Action{Task: payoutTask("a1", "acc_1", 100000), RequestedAt: at.Add(-time.Second)})
		tr = v.truth(payoutTask("a1", "acc_2", 1), at, nil, prior...)
		require.Equal(t, []string{"ledger/daily_payout_total"}, checks(tr, commitlayer.LensPolicy))
		// Earlier than 24 h does not count.
		old := append([]oracle.Action(nil), prior...)
		for i := range old {
			old[i].RequestedAt = old[i].RequestedAt.Add(-25 * time.Hour)
		}
		tr = v.truth(payoutTask("a1", "acc_2", 1), at, nil, old...)
		require.Empty(t, checks(tr, commitlayer.LensPolicy))
	})
}

func deployTask(svc, version, environment string) agent.Task {
	return agent.Task{Process: "deploy", Subject: commitlayer.Subject("service:" + svc), AgentID: "a1",
		Params: commitlayer.Attrs{"version": version, "environment": environment}}
}

func TestDeploy(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Deployment](t)(v.op.Deploy(ctx, "svc_api", "1.5.0", "production"))
		expect(t, v.truth(deployTask("svc_api", "1.5.0", "production"), at, nil), pass, pass)
	})
	t.Run("degraded, staging", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		must[systems.Deployment](t)(v.op.Deploy(ctx, "svc_worker", "1.0.0", "staging"))
		tr := v.truth(deployTask("svc_worker", "1.0.0", "staging"), at, nil)
		expect(t, tr, pass, fail)
		require.ElementsMatch(t, []string{"params/production_only", "platform/service_not_degraded"}, checks(tr, commitlayer.LensPolicy))
	})
	t.Run("unhealthy", func(t *testing.T) {
		v := newEnv(t, func(s *sandbox.Seed) { s.Service("svc_api").FailNextHealthCheck = true })
		at := v.e.Clock().Now()
		must[systems.Deployment](t)(v.op.Deploy(ctx, "svc_api", "1.5.0", "production"))
		tr := v.truth(deployTask("svc_api", "1.5.0", "production"), at, nil)
		expect(t, tr, fail, fail)
		require.Equal(t, []string{"platform/healthy"}, checks(tr, commitlayer.LensOutcome))
		require.Equal(t, []string{"platform/unhealthy"}, checks(tr, commitlayer.LensPolicy))
	})
	t.Run("rolled back", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		d := must[systems.Deployment](t)(v.op.Deploy(ctx, "svc_api", "1.5.0", "production"))
		must[systems.Deployment](t)(v.op.RollBack(ctx, d.ID))
		tr := v.truth(deployTask("svc_api", "1.5.0", "production"), at, nil)
		expect(t, tr, fail, pass)
	})
	t.Run("too many deploys", func(t *testing.T) {
		v := newEnv(t, nil)
		for i := range 3 {
			must[systems.Deployment](t)(v.op.Deploy(ctx, "svc_api", "1.4."+string(rune('3'+i)), "production"))
		}
		at := v.e.Clock().Now()
		must[systems.Deployment](t)(v.op.Deploy(ctx, "svc_api", "1.5.0", "production"))
		tr := v.truth(deployTask("svc_api", "1.5.0", "production"), at, []string{"platform"})
		require.Equal(t, []string{"platform/deploys_per_day"}, checks(tr, commitlayer.LensPolicy))
		require.Equal(t, unk, tr.Expected(commitlayer.LensPolicy))
	})
}

func tradeTask(product string, qty, limit int64) agent.Task {
	return agent.Task{Process: "trade", Subject: commitlayer.Subject("product:" + product), AgentID: "a1",
		Params: commitlayer.Attrs{"account_id": "acc_1", "side": "buy", "quantity": qty, "limit_price": limit}}
}

func trade(t *testing.T, v *env, product string, qty, limit int64) systems.BrokerOrder {
	return must[systems.BrokerOrder](t)(v.op.PlaceOrder(ctx, systems.TradeRequest{ProductID: product, AccountID: "acc_1",
		Side: "buy", Quantity: qty, LimitPrice: limit}))
}

func TestTrade(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		trade(t, v, "p_acme", 10, 15500)
		expect(t, v.truth(tradeTask("p_acme", 10, 15500), at, nil), pass, pass)
	})
	t.Run("not filled", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		trade(t, v, "p_acme", 10, 14000)
		tr := v.truth(tradeTask("p_acme", 10, 14000), at, nil)
		require.Equal(t, []string{"broker/filled"}, checks(tr, commitlayer.LensOutcome))
	})
	t.Run("busted", func(t *testing.T) {
		v := newEnv(t, nil)
		at := v.e.Clock().Now()
		o := trade(t, v, "p_acme", 10, 15500)
		must[systems.Fill](t)(v.op.BustFill(ctx, o.Fill.ID, "error trade"))
		tr := v.truth(tradeTask("p_acme", 10, 15500), at, nil)
		require.Equal(t, []string{"broker/filled"}, checks(tr, commitlayer.LensOutcome))
	})
	t.Run("halted", func(t *testing.T) {
		v := newEnv(t, nil)
		tr := v.truth(tradeTask("p_initech", 10, 10000), v.e.Clock().Now(), nil)
		expect(t, tr, fail, fail)
		require.Equal(t, []string{"broker/product_trading"}, checks(tr, commitlayer.LensPolicy))
	})
	t.Run("daily notional", func(t *testing.T) {
		v := newEnv(t, nil)
		p1 := v.e.Clock().Now()
		trade(t, v, "p_umbrella", 30, 250000) // 7 500 000
		at := v.e.Clock().Now()
		trade(t, v, "p_umbrella", 11, 250000) // 2 750 000 more
		tr := v.truth(tradeTask("p_umbrella", 11, 250000), at, nil,
			oracle.Action{Task: tradeTask("p_umbrella", 30, 250000), RequestedAt: p1})
		require.Equal(t, []string{"broker/daily_notional"}, checks(tr, commitlayer.LensPolicy))
		require.Empty(t, checks(tr, commitlayer.LensOutcome))
		// Without the prior run it is within the limit.
		expect(t, v.truth(tradeTask("p_umbrella", 11, 250000), at, nil), pass, pass)
	})
}

func TestJudgeBadInput(t *testing.T) {
	v := newEnv(t, nil)
	now := v.e.Clock().Now()
	for name, in := range map[string]oracle.Input{
		"unknown workflow": {Action: oracle.Action{Task: agent.Task{Process: "x", Subject: "order:o_1", AgentID: "a"}, RequestedAt: now}},
		"wrong subject":    {Action: oracle.Action{Task: agent.Task{Process: "refund", Subject: "ticket:t_1", AgentID: "a"}, RequestedAt: now}},
		"no time":          {Action: oracle.Action{Task: refundTask("o_1001", 1)}},
		"no params":        {Action: oracle.Action{Task: agent.Task{Process: "payout", Subject: "account:acc_1", AgentID: "a"}, RequestedAt: now}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := v.o.Truth(ctx, in)
			require.Error(t, err)
		})
	}
}

func TestOpen(t *testing.T) {
	_, err := oracle.Open(func(string) string { return "" })
	require.Error(t, err)
	_, err = oracle.Open(func(s string) string { return filepath.Join(t.TempDir(), "missing", s+".db") })
	require.Error(t, err)

	// A directory name with URI characters in it: copy a closed
	// enterprise's files there.
	src := t.TempDir()
	e, err := sandbox.New(ctx, src, sandbox.Options{})
	require.NoError(t, err)
	at := e.Clock().Now()
	require.NoError(t, e.Close())
	dir := filepath.Join(t.TempDir(), "odd #dir?x=1%20")
	require.NoError(t, os.Mkdir(dir, 0o755))
	for _, s := range sandbox.Systems {
		b, err := os.ReadFile(filepath.Join(src, s+".db"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, s+".db"), b, 0o644))
	}
	o, err := oracle.Open(func(s string) string { return filepath.Join(dir, s+".db") })
	require.NoError(t, err)
	defer o.Close()
	tr, err := o.Truth(ctx, oracle.Input{Action: oracle.Action{Task: refundTask("o_1001", 100), RequestedAt: at}})
	require.NoError(t, err)
	require.Equal(t, fail, tr.Outcome)
	require.Equal(t, pass, tr.Policy, "read the seeded order: %s", tr)

	// The oracle never writes.
	tr2, err := o.Truth(ctx, oracle.Input{Action: oracle.Action{Task: refundTask("o_1001", 100), RequestedAt: at}})
	require.NoError(t, err)
	require.Equal(t, tr, tr2)
}
