package contracts_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// minimal is a valid contract the error cases below break one field at a
// time. Line numbers: id 1, settlement 2, sources 3, policy 4-6, limits
// 7-13, effects 14-18, forbids 19-22.
const minimal = `id: c1
settlement: 10m
sources: [payments, orders]
policy:
  - id: eligible
    rule: state.orders.status == 'paid'
limits:
  - id: daily
    per: agent
    window: 24h
    effect: refund
    sum: effect.amount
    max: 100
effects:
  - id: refund
    source: payments
    type: refund_created
    expect: effect.amount == params.amount
forbids:
  - id: no_cancel
    source: orders
    type: order_status_changed
`

func TestParseMinimal(t *testing.T) {
	c := mustParse(t, minimal)
	require.Equal(t, "c1", c.ID())
	require.Equal(t, contracts.KindAction, c.Kind())
	require.Equal(t, []string{"payments", "orders"}, c.Sources())
	require.Equal(t, 10*time.Minute, c.Settlement())
	require.Equal(t, time.Duration(0), c.Watch())
	require.Equal(t, t0.Add(10*time.Minute), c.SettlesAt(t0))
	require.Equal(t, t0.Add(10*time.Minute), c.WatchUntil(t0))
	require.Equal(t, []commitlayer.FactType{{Source: "payments", Type: "refund_created"}, {Source: "orders", Type: "order_status_changed"}}, c.EffectKinds())
}

func TestParseErrors(t *testing.T) {
	// edit replaces old with new in minimal (old must occur).
	edit := func(old, new string) string {
		if !strings.Contains(minimal, old) {
			panic("test edit: " + old)
		}
		return strings.Replace(minimal, old, new, 1)
	}
	cases := []struct {
		name   string
		src    string
		field  string
		line   int
		reason string // substring of the reason
	}{
		{"malformed YAML", edit("sources: [payments, orders]", "sources: [payments, orders"), "yaml", 3, "did not find expected"},
		{"tab indentation", edit("  - id: eligible", "\t- id: eligible"), "yaml", 5, "cannot start any token"},
		{"empty document", "", "yaml", 1, "empty"},
		{"comment only", "# nothing\n", "yaml", 1, "empty"},
		{"two documents", minimal + "---\nid: c2\n", "yaml", 23, "one document"},
		{"not a mapping", "- a\n- b\n", "contract", 1, "must be a mapping"},
		{"unknown top-level field", edit("settlement: 10m", "settlement: 10m\nsettle: 5m"), "settle", 3, "unknown field"},
		{"unknown nested field", edit("    type: refund_created", "    type: refund_created\n    cnt: 1"), "effects[0].cnt", 18, "unknown field"},
		{"unknown reversed_by field", edit("    type: refund_created", "    type: refund_created\n    reversed_by: {source: payments, typ: x}"), "effects[0].reversed_by.typ", 18, "unknown field"},
		{"field given twice", edit("settlement: 10m", "settlement: 10m\nsettlement: 20m"), "settlement", 3, "given twice"},
		{"missing id", edit("id: c1\n", ""), "id", 1, "is required"},
		{"bad id", edit("id: c1", "id: Refund-Customer"), "id", 1, "a-z, 0-9 and _"},
		{"empty id", edit("id: c1", "id: ''"), "id", 1, "must not be empty"},
		{"bad kind", edit("id: c1", "id: c1\nkind: job"), "kind", 2, "action or outcome"},
		{"bad subject type", edit("id: c1", "id: c1\nsubject: 'order:o_1'"), "subject", 2, "not a subject type"},
		{"missing settlement", edit("settlement: 10m\n", ""), "settlement", 1, "is required"},
		{"zero settlement", edit("settlement: 10m", "settlement: 0s"), "settlement", 2, "greater than zero"},
		{"negative settlement", edit("settlement: 10m", "settlement: -10m"), "settlement", 2, "greater than zero"},
		{"bad duration", edit("settlement: 10m", "settlement: ten minutes"), "settlement", 2, "duration"},
		{"duration as a list", edit("settlement: 10m", "settlement: [10m]"), "settlement", 2, "must be a duration"},
		{"absurd duration", edit("settlement: 10m", "settlement: 100000d"), "settlement", 2, "longer than"},
		{"negative watch", edit("settlement: 10m", "settlement: 10m\nwatch: -1h"), "watch", 3, "must not be negative"},
		{"missing sources", edit("sources: [payments, orders]\n", ""), "sources", 1, "is required"},
		{"empty sources", edit("sources: [payments, orders]", "sources: []"), "sources", 3, "at least one"},
		{"sources not a list", edit("sources: [payments, orders]", "sources: payments"), "sources", 3, "must be a list"},
		{"duplicate source", edit("sources: [payments, orders]", "sources: [payments, orders, payments]"), "sources[2]", 3, "listed twice"},
		{"bad source name", edit("sources: [payments, orders]", "sources: [payments, orders, 'a b']"), "sources[2]", 3, "not a source name"},
		{"rule does not compile", edit("rule: state.orders.status == 'paid'", "rule: state.orders.status == "), "policy[0].rule", 6, "Syntax error"},
		{"rule not boolean", edit("rule: state.orders.status == 'paid'", "rule: params.amount + 1"), "policy[0].rule", 6, "must be a boolean expression"},
		{"rule is a string", edit("rule: state.orders.status == 'paid'", "rule: \"'paid'\""), "policy[0].rule", 6, "must be a boolean expression, but its type is string"},
		{"unknown variable", edit("rule: state.orders.status == 'paid'", "rule: order.status == 'paid'"), "policy[0].rule", 6, "undeclared reference to 'order'"},
		{"policy may not use effect", edit("rule: state.orders.status == 'paid'", "rule: effect.amount > 0"), "policy[0].rule", 6, "undeclared reference to 'effect'"},
		{"original only in reversals", edit("expect: effect.amount == params.amount", "expect: original.amount == 1"), "effects[0].expect", 18, "undeclared reference to 'original'"},
		{"state of a source not listed", edit("rule: state.orders.status == 'paid'", "rule: state.crm.tier == 'gold'"), "policy[0].rule", 6, "crm is not one of the contract's sources"},
		{"unknown action field", edit("rule: state.orders.status == 'paid'", "rule: action.user == 'x'"), "policy[0].rule", 6, `action has no field "user"`},
		{"missing rule", edit("    rule: state.orders.status == 'paid'\n", ""), "policy[0].rule", 5, "is required"},
		{"rule is a mapping", edit("rule: state.orders.status == 'paid'", "rule: {a: 1}"), "policy[0].rule", 6, "must be a string"},
		{"zero window", edit("window: 24h", "window: 0s"), "limits[0].window", 10, "greater than zero"},
		{"negative window", edit("window: 24h", "window: -24h"), "limits[0].window", 10, "greater than zero"},
		{"missing window", edit("    window: 24h\n", ""), "limits[0].window", 8, "is required"},
		{"limit without sum or count", edit("    sum: effect.amount\n", ""), "limits[0]", 8, "needs sum"},
		{"limit with count false", edit("    sum: effect.amount\n", "    count: false\n"), "limits[0]", 8, "needs sum"},
		{"limit with sum and count", edit("    sum: effect.amount\n", "    sum: effect.amount\n    count: true\n"), "limits[0]", 13, "either sum or count"},
		{"count not a bool", edit("    sum: effect.amount\n", "    count: 1\n"), "limits[0].count", 12, "true or false"},
		{"sum not a number", edit("sum: effect.amount", "sum: effect.amount > 1"), "limits[0].sum", 12, "must be a number"},
		{"limit of an unknown effect", edit("effect: refund", "effect: refunds"), "limits[0].effect", 11, `no effect has id "refunds"`},
		{"bad per", edit("per: agent", "per: tenant"), "limits[0].per", 9, "agent or subject"},
		{"negative max", edit("max: 100", "max: -1"), "limits[0].max", 13, "must not be negative"},
		{"max not an integer", edit("max: 100", "max: 1.5"), "limits[0].max", 13, "must be an integer"},
		{"missing max", edit("    max: 100\n", ""), "limits[0].max", 8, "is required"},
		{"duplicate check ids across sections", edit("  - id: no_cancel", "  - id: eligible"), "forbids[0].id", 20, `"eligible" is already used by policy[0]`},
		{"duplicate effect ids", edit("effects:\n", "effects:\n  - {id: refund, source: payments, type: x}\n"), "effects[1].id", 16, "already used by effects[0]"},
		{"unknown effect source", edit("    source: payments", "    source: ledger"), "effects[0].source", 16, `source "ledger" is not in sources`},
		{"unknown forbid source", edit("    source: orders", "    source: crm"), "forbids[0].source", 21, `source "crm" is not in sources`},
		{"unknown reversal source", edit("    type: refund_created", "    type: refund_created\n    reversed_by: {source: bank, type: x}"), "effects[0].reversed_by.source", 18, `source "bank" is not in sources`},
		{"missing effect type", edit("    type: refund_created\n", ""), "effects[0].type", 15, "is required"},
		{"effect count zero", edit("    type: refund_created", "    type: refund_created\n    count: 0"), "effects[0].count", 18, "between 1 and"},
		{"effect count not integer", edit("    type: refund_created", "    type: refund_created\n    count: once"), "effects[0].count", 18, "must be an integer"},
		{"effects not a list", edit("effects:\n  - id: refund\n    source: payments\n    type: refund_created\n    expect: effect.amount == params.amount\n", "effects: refund\n"), "effects", 14, "must be a list"},
		{"effect entry not a mapping", edit("effects:\n", "effects:\n  - refund\n"), "effects[0]", 15, "must be a mapping"},
		{"outcome without effects", "id: o\nkind: outcome\nsettlement: 1h\nsources: [a]\n", "effects", 1, "at least one effect"},
		{"YAML alias", edit("sources: [payments, orders]", "sources: &s [payments, orders]\ndescription: *s"), "description", 4, "aliases are not supported"},
		{"CEL error on a later line of a block", edit("rule: state.orders.status == 'paid'", "rule: |\n      state.orders.status == 'paid' &&\n      nope > 1"), "policy[0].rule", 8, "undeclared reference to 'nope'"},
		{"orphans not a bool", edit("    type: refund_created", "    type: refund_created\n    orphans: no"), "effects[0].orphans", 18, `must be true or false, got "no"`},
		{"orphans null", edit("    type: order_status_changed", "    type: order_status_changed\n    orphans:"), "forbids[0].orphans", 23, "must be true or false, got null"},
		{"orphans as a number", edit("    type: order_status_changed", "    type: order_status_changed\n    orphans: 0"), "forbids[0].orphans", 23, "must be true or false"},
		{"orphans is not a reversal field", edit("    type: refund_created", "    type: refund_created\n    reversed_by: {source: payments, type: x, orphans: false}"), "effects[0].reversed_by.orphans", 18, "unknown field"},
		{"orphans is not a policy field", edit("    rule: state.orders.status == 'paid'", "    rule: state.orders.status == 'paid'\n    orphans: false"), "policy[0].orphans", 7, "unknown field"},
		{"orphans is not a limit field", edit("    max: 100", "    max: 100\n    orphans: false"), "limits[0].orphans", 14, "unknown field"},
		{"orphans is not a top-level field", edit("id: c1", "id: c1\norphans: false"), "orphans", 2, "unknown field"},
		{"JSON unknown field", `{"id": "j", "settlement": "10m", "sources": ["a"],
 "effects": [{"id": "e", "source": "a", "type": "t", "bogus": true}]}`, "effects[0].bogus", 2, "unknown field"},
		{"JSON syntax", `{"id": "j", "settlement": "10m",` + "\n" + `"sources": ["a"]`, "yaml", 2, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := contracts.Parse([]byte(tc.src))
			require.Error(t, err)
			require.Nil(t, c)
			errs := contracts.Errors(err)
			var match *contracts.Error
			for _, e := range errs {
				if e.Field == tc.field && strings.Contains(e.Reason, tc.reason) {
					match = e
					break
				}
			}
			require.NotNil(t, match, "no error on %s with %q in %v", tc.field, tc.reason, err)
			require.Equal(t, tc.line, match.Line, "%v", match)
			if noID := tc.field == "yaml" || tc.field == "id" || tc.name == "not a mapping"; !noID {
				require.NotEmpty(t, match.Contract, "every error names the contract: %v", match)
			}
			require.Contains(t, err.Error(), match.Error())
		})
	}
}

func TestErrorFormat(t *testing.T) {
	_, err := contracts.Parse([]byte(strings.Replace(minimal, "expect: effect.amount == params.amount", "expect: effect.amount == nope", 1)))
	require.EqualError(t, err, "contract c1: effects[0].expect (line 18): undeclared reference to 'nope' (column 18)")
	var ce *contracts.Error
	require.True(t, errors.As(err, &ce))
	require.Equal(t, &contracts.Error{Contract: "c1", Field: "effects[0].expect", Line: 18,
		Reason: "undeclared reference to 'nope' (column 18)"}, ce)

	require.Equal(t, "contract (no id): yaml: contract is empty", (&contracts.Error{Field: "yaml", Reason: "contract is empty"}).Error())
	require.Nil(t, contracts.Errors(nil))
	require.Equal(t, []*contracts.Error{{Reason: "plain"}}, contracts.Errors(errors.New("plain")))
}

func TestParseReportsEveryError(t *testing.T) {
	src := `id: many
settlement: 0s
sources: [a, a]
policy:
  - {id: p, rule: effect.x}
  - {id: p, rule: "1"}
effects:
  - {id: e, source: b, type: t, extra: 1}
`
	_, err := contracts.Parse([]byte(src))
	var lines []int
	var fields []string
	for _, e := range contracts.Errors(err) {
		lines = append(lines, e.Line)
		fields = append(fields, e.Field)
	}
	require.Equal(t, []string{"settlement", "sources[1]", "policy[0].rule", "policy[1].id", "policy[1].rule", "effects[0].extra", "effects[0].source"}, fields)
	require.IsNonDecreasing(t, lines)
}

func TestParseTooLarge(t *testing.T) {
	src := minimal + "description: " + strings.Repeat("x", contracts.MaxContractBytes) + "\n"
	_, err := contracts.Parse([]byte(src))
	require.ErrorContains(t, err, "more than the")
}

func TestParseAcceptsJSON(t *testing.T) {
	yamlC := mustParse(t, minimal)
	b, err := json.Marshal(yamlC.Spec)
	require.NoError(t, err)
	jsonC := mustParse(t, string(b))
	require.Equal(t, yamlC.Spec, jsonC.Spec)
}

func TestParseDefaultsAndScalars(t *testing.T) {
	c := mustParse(t, `
id: scalars
settlement: 1d12h
watch: 0
sources: [a]
policy:
  - {id: always, rule: true}
limits:
  - {id: l, per: subject, window: 1.5d, effect: e, count: true, max: 10_000}
effects:
  - {id: e, source: a, type: t, count: 2}
`)
	require.Equal(t, 36*time.Hour, c.Settlement())
	require.Equal(t, time.Duration(0), c.Watch())
	require.Equal(t, "true", c.Spec.Policy[0].Rule)
	require.Equal(t, int64(10000), c.Spec.Limits[0].Max)
	require.Equal(t, contracts.Duration(36*time.Hour), c.Spec.Limits[0].Window)
	require.Equal(t, 2, c.Spec.Effects[0].Count)
	require.Equal(t, contracts.KindAction, c.Spec.Kind)
}

func TestParseOrphans(t *testing.T) {
	c := mustParse(t, `
id: o
settlement: 10m
sources: [a]
effects:
  - {id: left_out, source: a, type: t}
  - {id: off, source: a, type: n, orphans: false}
  - {id: on, source: a, type: u, orphans: true}
forbids:
  - {id: f_left_out, source: a, type: x}
  - {id: f_off, source: a, type: y, orphans: false}
`)
	yes, no := true, false
	e, f := c.Spec.Effects, c.Spec.Forbids
	require.Equal(t, []*bool{nil, &no, &yes}, []*bool{e[0].Orphans, e[1].Orphans, e[2].Orphans})
	require.Equal(t, []*bool{nil, &no}, []*bool{f[0].Orphans, f[1].Orphans})
	require.Equal(t, []bool{true, false, true, true, false},
		[]bool{e[0].ReportsOrphans(), e[1].ReportsOrphans(), e[2].ReportsOrphans(), f[0].ReportsOrphans(), f[1].ReportsOrphans()})

	// Left out stays left out through JSON; given values survive.
	b, err := json.Marshal(c.Spec)
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(b), `"orphans"`), "%s", b)
	require.Equal(t, c.Spec, mustParse(t, string(b)).Spec)
}

func TestParseDuration(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"10m", 10 * time.Minute, true},
		{"72h", 72 * time.Hour, true},
		{"3d", 72 * time.Hour, true},
		{"1d12h30m", 36*time.Hour + 30*time.Minute, true},
		{"0.5d", 12 * time.Hour, true},
		{"0", 0, true},
		{" 5s ", 5 * time.Second, true},
		{"", 0, false},
		{"d", 0, false},
		{"1d-1h", 0, false},
		{"-1d", 0, false},
		{"1e3d", 0, false},
		{"NaNd", 0, false},
		{"1x", 0, false},
		{"99999d", 0, false},
		{"9999999999h", 0, false},
		{"1dd", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			d, err := contracts.ParseDuration(tc.in)
			if !tc.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, d)
		})
	}
	for _, d := range []time.Duration{72 * time.Hour, 10 * time.Minute, 36 * time.Hour, 0, 90 * time.Second} {
		back, err := contracts.ParseDuration(contracts.Duration(d).String())
		require.NoError(t, err)
		require.Equal(t, d, back)
	}
}

func TestSandboxContractsParse(t *testing.T) {
	files, err := filepath.Glob("../sandbox/contracts/*.yaml")
	require.NoError(t, err)
	var ids []string
	for _, f := range files {
		c := load(t, f)
		ids = append(ids, c.ID())
		require.Equal(t, strings.TrimSuffix(filepath.Base(f), ".yaml"), c.ID())
		require.Equal(t, contracts.KindAction, c.Kind())
		require.Equal(t, 10*time.Minute, c.Settlement(), f)
		require.Equal(t, 72*time.Hour, c.Watch(), f)
		require.NotEmpty(t, c.Spec.Policy, f)
		require.NotEmpty(t, c.Spec.Effects, f)
		// Round trip through JSON gives the same contract.
		b, err := json.Marshal(c.Spec)
		require.NoError(t, err)
		require.Equal(t, c.Spec, mustParse(t, string(b)).Spec)
	}
	require.ElementsMatch(t, []string{"refund_customer", "cancel_subscription", "change_shipping_address", "approve_discount",
		"close_support_case", "send_payout", "deploy_service", "place_trade"}, ids)
	for _, id := range []string{"send_payout", "deploy_service", "place_trade"} {
		c := sandboxContract(t, id)
		require.NotEmpty(t, c.Spec.Limits, id)
		hasExpect, hasReversal := false, false
		for _, e := range c.Spec.Effects {
			hasExpect = hasExpect || e.Expect != ""
			hasReversal = hasReversal || e.ReversedBy != nil
		}
		require.True(t, hasExpect && hasReversal, id)
	}
}

func TestLint(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(src), 0o600))
		return p
	}
	good := write("good.yaml", minimal)
	again := write("again.yaml", minimal)
	bad := write("bad.yaml", strings.Replace(minimal, "window: 24h", "window: 0s\n    bogus: 1", 1))
	broken := write("broken.yaml", "id: [\n")
	missing := filepath.Join(dir, "missing.yaml")
	sandbox, err := filepath.Glob("../sandbox/contracts/*.yaml")
	require.NoError(t, err)

	var out bytes.Buffer
	require.True(t, contracts.Lint(&out, append([]string{good}, sandbox...)))
	require.Empty(t, out.String())

	out.Reset()
	require.False(t, contracts.Lint(&out, []string{good, bad, broken, missing, again}))
	require.Equal(t, strings.Join([]string{
		bad + ":10: limits[0].window: must be greater than zero",
		bad + ":11: limits[0].bogus: unknown field (expected one of id, per, window, effect, sum, count, max, remedy)",
		broken + ":1: yaml: did not find expected node content",
		missing + ": file: no such file or directory",
		again + ":1: id: contract c1 is also defined in " + good,
		"",
	}, "\n"), out.String())
}

func TestDocumentedExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/contract-language.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	require.True(t, ok)
	example, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	c := mustParse(t, example)
	require.Equal(t, "refund_customer", c.ID())
	in := refundWorld()
	in.Action.Contract = c.ID()
	in.Action.Params["currency"] = "USD"
	in.Facts[3].Attrs["currency"] = "USD"
	require.Equal(t, []string{}, got(c.Evaluate(in)))

	// The optional-value syntax the page mentions.
	o := mustParse(t, "id: o\nsettlement: 1m\nsources: [orders]\npolicy:\n  - {id: r, rule: \"state.orders.?status.orValue('') == 'paid'\"}\n")
	require.Equal(t, []string{}, got(o.Evaluate(in)))
	in.Facts = nil
	require.Equal(t, []string{"policy_violation r"}, got(o.Evaluate(in)))
}
