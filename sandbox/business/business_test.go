package business_test

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/business"
	sandboxcontracts "github.com/commitlayer/commitlayer/sandbox/contracts"
)

func parseContract(t *testing.T, id string) *contracts.Contract {
	t.Helper()
	src, err := fs.ReadFile(sandboxcontracts.FS, id+".yaml")
	require.NoError(t, err)
	c, err := contracts.Parse(src)
	require.NoError(t, err, id)
	return c
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// The systems the oracle reads a process's truth from are the systems its
// contract names as sources: the oracle and CommitLayer look at the same
// systems of record, so a system being down makes the same lenses
// unknowable for both.
func TestNeedsAreContractSources(t *testing.T) {
	for _, p := range business.All() {
		t.Run(p.Name, func(t *testing.T) {
			c := parseContract(t, p.Contract)
			require.Equal(t, sorted(c.Sources()), sorted(p.Needs.All()), "contract %s sources vs the oracle's needs", p.Contract)
			for _, e := range p.Effects {
				require.Contains(t, c.Sources(), e.System, "effect %s.%s", e.System, e.Type)
			}
			require.Contains(t, c.Sources(), p.Write.System)
		})
	}
}

// Every contract file belongs to one process, and each process's contract
// is about its subject type.
func TestContractsAndProcesses(t *testing.T) {
	files, err := fs.Glob(sandboxcontracts.FS, "*.yaml")
	require.NoError(t, err)
	var ids []string
	for _, p := range business.All() {
		ids = append(ids, p.Contract+".yaml")
		require.Equal(t, p.SubjectType, parseContract(t, p.Contract).Spec.Subject, p.Name)
	}
	require.Equal(t, sorted(files), sorted(ids))
}

func TestRegistry(t *testing.T) {
	all := business.All()
	require.Len(t, all, 8)
	require.Equal(t, []string{"refund", "cancel", "address", "discount", "close", "payout", "deploy", "trade"}, business.Names())
	seen := map[string]bool{}
	for i, p := range all {
		require.Equal(t, business.Names()[i], p.Name)
		require.False(t, seen[p.Contract], "contract %s twice", p.Contract)
		seen[p.Contract] = true
		got, ok := business.Lookup(p.Name)
		require.True(t, ok)
		require.Equal(t, p.Contract, got.Contract)

		// The main write is a write tool on the write's system and route.
		spec, ok := agent.Tool(p.Write.Tool)
		require.True(t, ok, "%s: tool %s", p.Name, p.Write.Tool)
		require.True(t, spec.Write, p.Name)
		require.True(t, strings.HasPrefix(p.Write.Route, "POST /"+p.Write.System+"/"), "%s: %s", p.Name, p.Write.Route)
		require.Contains(t, sandbox.Systems, p.Write.System)
		for _, s := range p.Needs.All() {
			require.Contains(t, sandbox.Systems, s, p.Name)
		}

		// The base task is a valid task of the process, in words.
		b := p.Base()
		task := agent.Task{Process: p.Name, Subject: b.Subject, TicketID: b.Ticket, Params: b.Params, AgentID: "agent-1"}
		require.NoError(t, task.Validate(), p.Name)
		require.Contains(t, task.Prompt(), b.Subject.ID(), p.Name)
		require.NotEmpty(t, p.Report(b.Subject.ID(), b.Params))
		require.NotNil(t, p.Script)
	}
	for _, name := range []string{"", "Refund", "refund ", "nope"} {
		_, ok := business.Lookup(name)
		require.False(t, ok, "%q", name)
	}
}

func TestLookupReturnsFreshValues(t *testing.T) {
	p, ok := business.Lookup(business.Refund)
	require.True(t, ok)
	p.Base().Params["amount"] = int64(1)
	p.Params[0] = "changed"
	p.Needs.Outcome[0] = "changed"
	p.Effects[0].Values = append(p.Effects[0].Values, "changed")
	q, _ := business.Lookup(business.Refund)
	require.Equal(t, int64(2500), q.Base().Params["amount"])
	require.Equal(t, "amount", q.Params[0])
	require.Equal(t, "payments", q.Needs.Outcome[0])
	require.Empty(t, q.Effects[0].Values)
}

func TestMoney(t *testing.T) {
	for _, tc := range []struct {
		amount any
		want   string
	}{
		{int64(2500), "25.00 USD"}, {int64(-5), "-0.05 USD"}, {2500.0, "25.00 USD"}, {"120000", "1200.00 USD"},
		{2500.5, "2500.5 USD"}, {"x", "x USD"}, {nil, "<nil> USD"},
	} {
		require.Equal(t, tc.want, business.Money(tc.amount, "USD"), "%v", tc.amount)
	}
}

// fakeSteps records a script's calls; fail makes the named tool fail.
type fakeSteps struct {
	id, ticket string
	params     commitlayer.Attrs
	read       map[string]map[string]any
	fail       string
	calls      []string
}

var _ business.Steps = (*fakeSteps)(nil)

func (f *fakeSteps) ID() string     { return f.id }
func (f *fakeSteps) Ticket() string { return f.ticket }
func (f *fakeSteps) Read(_ context.Context, tool string, _ map[string]any) (map[string]any, error) {
	f.calls = append(f.calls, tool)
	if tool == f.fail {
		return nil, f.Fail(tool, "failed")
	}
	return f.read[tool], nil
}
func (f *fakeSteps) Call(_ context.Context, tool string, _ map[string]any) error {
	f.calls = append(f.calls, tool)
	if tool == f.fail {
		return f.Fail(tool, "failed")
	}
	return nil
}
func (f *fakeSteps) ReadTicket(ctx context.Context, id string) error {
	_, err := f.Read(ctx, "get_ticket", nil)
	return err
}
func (f *fakeSteps) Note(ctx context.Context, body string) error {
	if f.ticket == "" {
		return nil
	}
	return f.Call(ctx, "add_note", nil)
}
func (f *fakeSteps) Param(name string) any          { return f.params[name] }
func (f *fakeSteps) Fail(tool, reason string) error { return &stepErr{tool + ": " + reason} }

type stepErr struct{ s string }

func (e *stepErr) Error() string { return e.s }

// Each script makes its process's calls in order (docs/sandbox-vocabulary.md)
// and stops at the first that fails.
func TestScripts(t *testing.T) {
	want := map[string][]string{
		"refund":   {"get_order", "get_ticket", "refund", "update_order_status", "add_note"},
		"cancel":   {"get_subscription", "get_ticket", "cancel_subscription", "stop_billing", "add_note"},
		"address":  {"get_order", "get_ticket", "change_address", "add_note"},
		"discount": {"get_order", "get_customer", "get_ticket", "approve_discount", "add_note"},
		"close":    {"get_ticket", "add_note", "close_ticket"},
		"payout":   {"get_account", "send_payout"},
		"deploy":   {"get_service", "deploy"},
		"trade":    {"get_product", "place_order"},
	}
	for _, p := range business.All() {
		t.Run(p.Name, func(t *testing.T) {
			b := p.Base()
			f := &fakeSteps{id: b.Subject.ID(), ticket: b.Ticket, params: b.Params,
				read: map[string]map[string]any{"get_order": {"customer_id": "c_1"}}}
			require.NoError(t, p.Script(context.Background(), f))
			require.Equal(t, want[p.Name], f.calls)

			f = &fakeSteps{id: b.Subject.ID(), ticket: b.Ticket, params: b.Params, fail: p.Write.Tool,
				read: map[string]map[string]any{"get_order": {"customer_id": "c_1"}}}
			err := p.Script(context.Background(), f)
			require.ErrorContains(t, err, p.Write.Tool+": failed")
			require.Equal(t, p.Write.Tool, f.calls[len(f.calls)-1], "stops at the failed write")
		})
	}
	// A discount on an order without a customer stops at the read.
	p, _ := business.Lookup(business.Discount)
	f := &fakeSteps{id: "o_1", read: map[string]map[string]any{"get_order": {}}}
	require.ErrorContains(t, p.Script(context.Background(), f), "get_order: the order has no customer_id")
	require.Equal(t, []string{"get_order"}, f.calls)
}
