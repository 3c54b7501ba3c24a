package contracts_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	sandboxcontracts "github.com/commitlayer/commitlayer/sandbox/contracts"
)

const boundRefund = `id: refund_order
subject: order
settlement: 10m
sources: [payments]
effects:
  - id: refund
    source: payments
    type: refund_created
bindings:
  - tool: refund_order
    subject: "'order:' + args.order_id"
    params: {amount: args.amount, currency: args.currency}
    when: "args.amount > 0"
  - tool: refund_order
    subject: "'order:' + string(result.order)"
    params:
      refund_id: result.refund_id
      meta: "{'n': [1, 2.5, true, null], 'k': 'v'}"
    when: has(result.refund_id)
`

func TestBindingsMatch(t *testing.T) {
	c := mustParse(t, boundRefund)
	require.Equal(t, []string{"refund_order"}, c.Tools())
	require.True(t, c.Binds("refund_order"))
	require.False(t, c.Binds("get_order"))

	args := map[string]any{"order_id": "o_1", "amount": 2500, "currency": "USD"}
	m, err := c.Bind("refund_order", args, nil)
	require.NoError(t, err)
	require.Len(t, m, 1)
	require.Equal(t, commitlayer.Subject("order:o_1"), m[0].Subject)
	require.Equal(t, commitlayer.Attrs{"amount": int64(2500), "currency": "USD"}, m[0].Params)
	require.Equal(t, 0, m[0].Binding)
	require.Same(t, c, m[0].Contract)

	// Both bindings match once the result carries a refund id.
	m, err = c.Bind("refund_order", args, map[string]any{"refund_id": "re_9", "order": "o_1"})
	require.NoError(t, err)
	require.Len(t, m, 2)
	require.Equal(t, 1, m[1].Binding)
	require.Equal(t, commitlayer.Attrs{"refund_id": "re_9",
		"meta": map[string]any{"n": []any{int64(1), 2.5, true, nil}, "k": "v"}}, m[1].Params)

	// when false: no match, no error.
	m, err = c.Bind("refund_order", map[string]any{"order_id": "o_1", "amount": 0}, nil)
	require.NoError(t, err)
	require.Empty(t, m)

	// Another tool: nothing.
	m, err = c.Bind("get_order", args, nil)
	require.NoError(t, err)
	require.Empty(t, m)
}

func TestBindingsEvaluationErrors(t *testing.T) {
	src := `id: refund_order
subject: order
settlement: 10m
sources: [payments]
bindings:
  - tool: t_missing
    subject: "'order:' + args.order_id"
  - tool: t_type
    subject: "'ticket:' + args.id"
  - tool: t_form
    subject: "args.id"
  - tool: t_notstring
    subject: "args.n"
  - tool: t_param
    subject: "'order:o_1'"
    params: {at: "timestamp('2026-01-01T00:00:00Z')"}
  - tool: t_when
    subject: "'order:o_1'"
    when: args.n
`
	c := mustParse(t, src)
	for _, tc := range []struct {
		tool   string
		args   map[string]any
		field  string
		reason string
	}{
		{"t_missing", map[string]any{}, "bindings[0].subject", "no such key: order_id"},
		{"t_type", map[string]any{"id": "t_1"}, "bindings[1].subject", `acts on order subjects`},
		{"t_form", map[string]any{"id": "o_1"}, "bindings[2].subject", "not of the form type:id"},
		{"t_notstring", map[string]any{"n": 3}, "bindings[3].subject", "not a string"},
		{"t_param", map[string]any{}, "bindings[4].params.at", "not a JSON value"},
		{"t_when", map[string]any{"n": 3}, "bindings[5].when", "not a bool"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			m, err := c.Bind(tc.tool, tc.args, nil)
			require.Empty(t, m)
			var be *contracts.BindingError
			require.ErrorAs(t, err, &be)
			require.Equal(t, tc.field, be.Field)
			require.Equal(t, tc.tool, be.Tool)
			require.Equal(t, "refund_order", be.Contract)
			require.Contains(t, be.Reason, tc.reason)
			require.ErrorIs(t, err, commitlayer.ErrInvalid)
		})
	}
	// Arguments that are not JSON values are refused before any CEL.
	_, err := c.Bind("t_missing", map[string]any{"x": struct{}{}}, nil)
	require.ErrorContains(t, err, "args")
}

func TestBindingsRefusedWithLine(t *testing.T) {
	src := `id: refund_order
subject: order
settlement: 10m
sources: [payments]
bindings:
  - tool: refund_order
    subject: "'order:' + args.order_id +"
  - tool: "has space"
    subject: "1 + 2"
  - tool: ok
    subject: "'order:' + params.order_id"
    params:
      amount: state.payments.amount
    when: "'yes'"
  - subject: "'order:o_1'"
    extra: 1
`
	_, err := contracts.Parse([]byte(src))
	require.Error(t, err)
	got := map[string]int{}
	for _, e := range contracts.Errors(err) {
		got[e.Field] = e.Line
	}
	require.Equal(t, map[string]int{
		"bindings[0].subject":       7,
		"bindings[1].tool":          8,
		"bindings[1].subject":       9,
		"bindings[2].subject":       11,
		"bindings[2].params.amount": 13,
		"bindings[2].when":          14,
		"bindings[3].extra":         16,
		"bindings[3].tool":          15,
	}, got, "%v", err)
	require.ErrorContains(t, err, "a binding reads only args and result")

	// Lint prints them with file and line.
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	var out bytes.Buffer
	require.False(t, contracts.Lint(&out, []string{path}))
	require.Contains(t, out.String(), path+":7: bindings[0].subject: ")
	require.Contains(t, out.String(), path+":13: bindings[2].params.amount: ")

	// Policy predicates cannot read args.
	_, err = contracts.Parse([]byte(strings.Replace(boundRefund, "sources: [payments]\n",
		"sources: [payments]\npolicy:\n  - id: p\n    rule: args.amount > 0\n", 1)))
	require.ErrorContains(t, err, "only defined in bindings")
}

func TestBindingsIndex(t *testing.T) {
	a := mustParse(t, boundRefund)
	b := mustParse(t, strings.Replace(strings.Replace(boundRefund, "id: refund_order", "id: another", 1),
		"when: \"args.amount > 0\"", "when: \"args.amount > 1000000\"", 1))
	plain := mustParse(t, strings.Split(boundRefund, "bindings:")[0])
	require.Empty(t, plain.Tools())
	idx := contracts.NewBindings([]*contracts.Contract{a, nil, plain, b})
	require.Equal(t, []string{"refund_order"}, idx.Tools())
	require.True(t, idx.Bound("refund_order"))
	require.False(t, idx.Bound("get_order"))
	args := map[string]any{"order_id": "o_1", "amount": 2_000_000, "currency": "USD"}
	m, err := idx.Match("refund_order", args, nil)
	require.NoError(t, err)
	require.Len(t, m, 2)
	require.Equal(t, "another", m[0].Contract.ID()) // id order
	require.Equal(t, "refund_order", m[1].Contract.ID())

	// One contract's failure leaves the other's match.
	bad := mustParse(t, strings.Replace(strings.Replace(boundRefund, "id: refund_order", "id: zz_bad", 1),
		"args.order_id", "args.nope", 1))
	idx = contracts.NewBindings([]*contracts.Contract{a, bad})
	m, err = idx.Match("refund_order", args, nil)
	require.Len(t, m, 1)
	var be *contracts.BindingError
	require.True(t, errors.As(err, &be))
	require.Equal(t, "zz_bad", be.Contract)

	var none *contracts.Bindings
	require.False(t, none.Bound("x"))
}

// The sandbox contracts bind each process's write tool to its contract,
// with the params the harness records.
func TestSandboxBindings(t *testing.T) {
	entries, err := sandboxcontracts.FS.ReadDir(".")
	require.NoError(t, err)
	var cs []*contracts.Contract
	for _, e := range entries {
		src, err := sandboxcontracts.FS.ReadFile(e.Name())
		require.NoError(t, err)
		c, err := contracts.Parse(src)
		require.NoError(t, err, e.Name())
		require.Len(t, c.Tools(), 1, e.Name())
		cs = append(cs, c)
	}
	idx := contracts.NewBindings(cs)
	require.Equal(t, []string{"approve_discount", "cancel_subscription", "change_address", "close_ticket",
		"deploy", "place_order", "refund", "send_payout"}, idx.Tools())
	m, err := idx.Match("refund", map[string]any{"order_id": "o_1001", "amount": 2500, "currency": "USD", "reason": "x"}, nil)
	require.NoError(t, err)
	require.Len(t, m, 1)
	require.Equal(t, "refund_customer", m[0].Contract.ID())
	require.Equal(t, commitlayer.Subject("order:o_1001"), m[0].Subject)
	require.Equal(t, commitlayer.Attrs{"amount": int64(2500), "currency": "USD"}, m[0].Params)
	m, err = idx.Match("place_order", map[string]any{"product_id": "p_acme", "account_id": "acc_1", "side": "buy",
		"quantity": 10, "limit_price": 1500}, nil)
	require.NoError(t, err)
	require.Equal(t, commitlayer.Subject("product:p_acme"), m[0].Subject)
	require.Equal(t, commitlayer.Attrs{"account_id": "acc_1", "side": "buy", "quantity": int64(10), "limit_price": int64(1500)}, m[0].Params)
}
