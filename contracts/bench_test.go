package contracts_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// benchTenant returns n facts as a real tenant's look: the refunded order
// o_1001 with its customer, charge, ticket and the three effects (7 facts),
// and the rest spread over other orders, their customers and tickets.
func benchTenant(n int) []commitlayer.Fact {
	facts := []commitlayer.Fact{
		fact("crm", "customer_created", "customer:c_17", "crm-c17", seeded, attrs{"tier": "gold", "status": "active"}),
		fact("orders", "order_created", "order:o_1001", "orders-o1001", seeded,
			attrs{"customer_id": "c_17", "status": "paid", "total": int64(5000), "currency": usd, "address": "1 Main St"}, "customer:c_17"),
		fact("payments", "charge_captured", "order:o_1001", "payments-ch", seeded, attrs{"charge_id": "ch_1", "amount": int64(5000), "currency": usd}),
		fact("tickets", "ticket_opened", "ticket:t_9", "tickets-t9", seeded, attrs{"status": "open"}, "order:o_1001", "customer:c_17"),
		fact("payments", "refund_created", "order:o_1001", "payments-re", time.Second, attrs{"refund_id": "re_1", "amount": int64(2500), "currency": usd, "status": "succeeded"}),
		fact("orders", "order_status_changed", "order:o_1001", "orders-st", 2*time.Second, attrs{"status": "refunded", "previous": "paid"}),
		fact("tickets", "note_added", "ticket:t_9", "tickets-n", 3*time.Second, attrs{"note_id": "n_1", "body": "refunded"}, "order:o_1001", "customer:c_17"),
	}
	for i := 0; len(facts) < n; i++ {
		order := fmt.Sprintf("order:o_%d", 2000+i/4)
		customer := fmt.Sprintf("customer:c_%d", 100+i/8)
		off := time.Duration(i%600-300) * time.Minute
		switch i % 4 {
		case 0:
			facts = append(facts, fact("orders", "order_created", order, fmt.Sprintf("o-%d", i), off,
				attrs{"status": "paid", "total": int64(1000 + i), "currency": usd}, customer))
		case 1:
			facts = append(facts, fact("payments", "refund_created", order, fmt.Sprintf("p-%d", i), off, attrs{"refund_id": fmt.Sprint(i), "amount": int64(i)}))
		case 2:
			facts = append(facts, fact("tickets", "note_added", fmt.Sprintf("ticket:t_%d", i), fmt.Sprintf("t-%d", i), off, attrs{"body": "hi"}, order, customer))
		default:
			facts = append(facts, fact("orders", "order_status_changed", order, fmt.Sprintf("s-%d", i), off, attrs{"status": "shipped"}))
		}
	}
	return facts[:n]
}

// benchSubject returns n facts all on the action's order (a pathological
// tenant): history before the action, and updates after it.
func benchSubject(n int) []commitlayer.Fact {
	facts := benchTenant(7)
	for i := 0; len(facts) < n; i++ {
		off := time.Duration(i%1000-500) * time.Minute
		switch i % 3 {
		case 0:
			facts = append(facts, fact("orders", "order_status_changed", "order:o_1001", fmt.Sprintf("s-%d", i), off, attrs{"status": "paid", "previous": "pending"}))
		case 1:
			facts = append(facts, fact("payments", "charge_captured", "order:o_1001", fmt.Sprintf("c-%d", i), off, attrs{"amount": int64(i)}))
		default:
			facts = append(facts, fact("orders", "address_changed", "order:o_1001", fmt.Sprintf("a-%d", i), off, attrs{"address": "x"}))
		}
	}
	return facts[:n]
}

func BenchmarkEvaluate(b *testing.B) {
	c := sandboxContract(b, "refund_customer")
	for _, shape := range []struct {
		name  string
		facts func(int) []commitlayer.Fact
	}{{"tenant", benchTenant}, {"subject", benchSubject}} {
		for _, n := range []int{10, 100, 1000, 10000} {
			in := contracts.Input{
				Action:   act("a_1", "refund_customer", "agent_1", "order:o_1001", 0, attrs{"amount": int64(2500), "currency": usd, "ticket_id": "t_9"}),
				Facts:    shape.facts(n),
				Coverage: connected("payments", "orders", "tickets"),
				Now:      t0.Add(20 * time.Minute),
			}
			v := c.Evaluate(in)
			if shape.name == "tenant" {
				require.Equal(b, []string{}, got(v), "the benchmark verifies a refund that went right")
			}
			b.Run(fmt.Sprintf("%s/facts=%d", shape.name, n), func(b *testing.B) {
				b.ReportAllocs()
				defer reportCPU(b)()
				for b.Loop() {
					c.Evaluate(in)
				}
			})
		}
	}
}

// BenchmarkEvaluateLimit: a payout with 20 prior payouts by the same agent
// in the window, among 1000 facts.
func BenchmarkEvaluateLimit(b *testing.B) {
	c := sandboxContract(b, "send_payout")
	in := contracts.Input{
		Action:   act("a_1", "send_payout", "agent_1", "account:acc_0", 0, attrs{"amount": int64(100), "currency": usd}),
		Coverage: connected("ledger"),
		Now:      t0.Add(20 * time.Minute),
	}
	for i := range 1000 {
		acc := fmt.Sprintf("account:acc_%d", i%50)
		if i < 50 {
			in.Facts = append(in.Facts, fact("ledger", "account_opened", acc, fmt.Sprintf("ao-%d", i), -48*time.Hour, attrs{"status": "active", "currency": usd}))
			continue
		}
		in.Facts = append(in.Facts, fact("ledger", "payout_sent", acc, fmt.Sprintf("po-%d", i), -time.Duration(i)*time.Minute, attrs{"payout_id": fmt.Sprint(i), "amount": int64(100), "currency": usd}))
	}
	in.Facts = append(in.Facts, fact("ledger", "payout_sent", "account:acc_0", "po-main", time.Second, attrs{"payout_id": "main", "amount": int64(100), "currency": usd}))
	for i := 1; i <= 20; i++ {
		in.Prior = append(in.Prior, act(fmt.Sprintf("p%d", i), "send_payout", "agent_1", fmt.Sprintf("account:acc_%d", i), -time.Duration(i)*time.Hour, attrs{"amount": int64(100)}))
	}
	require.Equal(b, []string{}, got(c.Evaluate(in)))
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		c.Evaluate(in)
	}
}

// BenchmarkEvaluateThrough: cancel_subscription (no_refund through the
// customer) for a customer with n orders (an order_created linking the
// customer and a charge on each, a refund on one), among 10 000 facts of
// other customers.
func BenchmarkEvaluateThrough(b *testing.B) {
	c := sandboxContract(b, "cancel_subscription")
	for _, n := range []int{1, 10, 100, 1000} {
		facts := benchTenant(10000)
		facts = append(facts,
			fact("crm", "subscription_created", "subscription:sub_1", "crm-sub1", seeded, attrs{"status": "active"}, "customer:c_17"),
			fact("crm", "subscription_status_changed", "subscription:sub_1", "crm-sub1-c", time.Second, attrs{"status": "cancelled"}, "customer:c_17"),
			fact("payments", "billing_stopped", "subscription:sub_1", "payments-bs", 2*time.Second, attrs{}),
			fact("tickets", "note_added", "ticket:t_4", "tickets-n4", 3*time.Second, attrs{"body": "cancelled"}, "subscription:sub_1", "customer:c_17"))
		for i := range n {
			order := fmt.Sprintf("order:o_c17_%d", i)
			facts = append(facts,
				fact("orders", "order_created", order, "oc-"+order, seeded, attrs{"status": "paid"}, "customer:c_17"),
				fact("payments", "charge_captured", order, "ch-"+order, seeded, attrs{"amount": int64(100)}))
		}
		facts = append(facts, fact("payments", "refund_created", "order:o_c17_0", "re-c17", 4*time.Second, attrs{"amount": int64(100)}))
		in := contracts.Input{
			Action:   act("a_1", "cancel_subscription", "agent_1", "subscription:sub_1", 0, attrs{"ticket_id": "t_4"}),
			Facts:    facts,
			Coverage: connected("crm", "payments", "tickets"),
			Now:      t0.Add(20 * time.Minute),
		}
		require.Equal(b, []string{"forbidden_effect no_refund"}, got(c.Evaluate(in)))
		b.Run(fmt.Sprintf("orders=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				c.Evaluate(in)
			}
		})
	}
}

// reportCPU adds a cpu-ns/op metric: the process's CPU time (all threads,
// GC included) per iteration. Unlike ns/op it does not grow when other
// processes take the machine's cores, so it is the figure to compare on a
// shared machine. Use as: defer reportCPU(b)().
func reportCPU(b *testing.B) func() {
	start, ok := processCPU()
	return func() {
		end, ok2 := processCPU()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func BenchmarkParse(b *testing.B) {
	src := []byte(refundSrc)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := contracts.Parse(src); err != nil {
			b.Fatal(err)
		}
	}
}
