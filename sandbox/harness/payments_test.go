package harness_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	sbcontracts "github.com/commitlayer/commitlayer/sandbox/contracts"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

// TestHostSelectsEachPaymentsBackendOnce: one selection per name per
// process, a failed one (stripe without a key) not kept and its error free
// of any key, all closed by CloseAll.
func TestHostSelectsEachPaymentsBackendOnce(t *testing.T) {
	h := &harness.Host{}
	noEnv := func(string) string { return "" }
	sb, err := h.Payments("", noEnv, nil)
	require.NoError(t, err)
	require.Equal(t, stripepay.NameSandbox, sb.Name)
	require.Nil(t, sb.Payments, "the sandbox's own payments")

	fake, err := h.Payments(stripepay.NameStripeFake, noEnv, nil)
	require.NoError(t, err)
	require.NotNil(t, fake.Payments)
	again, err := h.Payments(stripepay.NameStripeFake, noEnv, nil)
	require.NoError(t, err)
	require.Same(t, fake, again, "selected once per process")

	_, err = h.Payments(stripepay.NameStripe, noEnv, nil)
	require.ErrorIs(t, err, stripepay.ErrNoKey)
	const key = "sk_live_0123456789abcdefSECRET"
	_, err = h.Payments(stripepay.NameStripe, func(k string) string {
		if k == stripepay.EnvKey {
			return key
		}
		return ""
	}, nil)
	require.ErrorIs(t, err, stripepay.ErrNotTestKey)
	require.NotContains(t, err.Error(), key)

	_, err = h.Payments("paypal", noEnv, nil)
	require.Error(t, err)

	h.CloseAll()
	fresh, err := h.Payments(stripepay.NameStripeFake, noEnv, nil)
	require.NoError(t, err)
	require.NotSame(t, fake, fresh, "CloseAll closed and forgot the selection")
	h.CloseAll()
}

// TestStartWithStripeFakeRefundsOnStripe runs a refund scenario's agent on
// an enterprise built with the stripe-fake selection: the refund the agent
// gets back is a Stripe refund (re_…), and the oracle reads the enterprise.
func TestStartWithStripeFakeRefundsOnStripe(t *testing.T) {
	h := &harness.Host{}
	t.Cleanup(h.CloseAll)
	sel, err := h.Payments(stripepay.NameStripeFake, func(string) string { return "" }, nil)
	require.NoError(t, err)
	sc, ok := catalogue.Lookup("refund/retried_twice")
	require.True(t, ok)
	l, err := harness.StartWith(context.Background(), t.TempDir(), sc, harness.StartOptions{Payments: sel.Payments})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	res, err := l.RunAgent(context.Background())
	require.NoError(t, err)
	var refunds int
	for _, c := range res.Trajectory.Calls {
		if c.Path == "/payments/refunds" && c.OK() {
			require.Contains(t, c.Response, `"re_`, "a Stripe refund id")
			refunds++
		}
	}
	require.Positive(t, refunds)
	truth, _, err := l.Truth(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, truth.Outcome)
	require.Empty(t, report.Refusals(res.Trajectory.Calls), "partial refunds: Stripe refuses none")

	// The same lost responses on a full refund: the retry without a key is
	// refused by Stripe, and the refusal says so.
	full := sc
	full.Task.Params = maps.Clone(sc.Task.Params)
	full.Task.Params["amount"] = int64(12000)
	l2, err := harness.StartWith(context.Background(), t.TempDir(), full, harness.StartOptions{Payments: sel.Payments})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l2.Close() })
	res2, err := l2.RunAgent(context.Background())
	require.NoError(t, err)
	// The second attempt's answer (a refusal too) is lost to the chaos.
	require.Equal(t, []string{"POST /payments/refunds attempt 3: 400 charge_already_refunded (Stripe)"}, report.Refusals(res2.Trajectory.Calls))
}

func TestRefusalsFromToolResponses(t *testing.T) {
	tests := []struct {
		name  string
		calls []llm.Attempt
		want  []string
	}{
		{"none", []llm.Attempt{{Method: "POST", Path: "/payments/refunds", Attempt: 1, Status: 200, Response: `{"id":"re_1"}`}}, nil},
		{"Stripe's refusal", []llm.Attempt{
			{Method: "POST", Path: "/payments/refunds", Attempt: 1},
			{Method: "POST", Path: "/payments/refunds", Attempt: 2, Status: 400,
				Response: `{"error":{"code":"charge_already_refunded","message":"charge ch_1 has already been refunded (Stripe)"}}`},
		}, []string{"POST /payments/refunds attempt 2: 400 charge_already_refunded (Stripe)"}},
		{"the sandbox's own refusal", []llm.Attempt{{Method: "POST", Path: "/payments/refunds", Attempt: 1, Status: 400,
			Response: `{"error":{"code":"charge_already_refunded","message":"charge ch_1 has already been refunded"}}`}},
			[]string{"POST /payments/refunds attempt 1: 400 charge_already_refunded"}},
		{"no code", []llm.Attempt{{Method: "POST", Path: "/payments/refunds", Attempt: 1, Status: 409, Response: `nope`}},
			[]string{"POST /payments/refunds attempt 1: 409 (no code)"}},
		{"load and outages are not refusals", []llm.Attempt{
			{Method: "POST", Path: "/payments/refunds", Attempt: 1, Status: 429},
			{Method: "POST", Path: "/payments/refunds", Attempt: 2, Status: 503},
		}, nil},
		{"other systems are not payments", []llm.Attempt{{Method: "GET", Path: "/orders/orders/o_1", Attempt: 1, Status: 404,
			Response: `{"error":{"code":"not_found"}}`}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, report.Refusals(tc.calls))
		})
	}
}

// TestStripeResultsFilesAndMarkdown: a Stripe run's results are
// latest_stripe.*, carry payments_backend, the notice, the refusals and
// the rows that differ from the sandbox run's.
func TestStripeResultsFilesAndMarkdown(t *testing.T) {
	rows := []matrix.Row{
		{ID: "refund/retried_twice", Process: "refund", Claim: "failure", Agree: matrix.Agree{Outcome: true, Policy: true},
			Truth:   matrix.Truth{Outcome: "PASS", Policy: "PASS"},
			Refused: []string{"POST /payments/refunds attempt 2: 400 charge_already_refunded (Stripe)"}},
		{ID: "refund/over_limit", Process: "refund", Claim: "success", Agree: matrix.Agree{Outcome: true, Policy: true},
			Truth: matrix.Truth{Outcome: "PASS", Policy: "FAIL"}},
		{ID: "refund/permission_denied", Process: "refund", Claim: "failure", Agree: matrix.Agree{Outcome: true, Policy: true},
			Truth: matrix.Truth{Outcome: "FAIL", Policy: "PASS"}, Refused: []string{"POST /payments/refunds attempt 1: 403 forbidden"}},
	}
	sandboxRes := report.NewResults("abc", testTime, testTime, 4, []matrix.Row{
		{ID: "refund/retried_twice", Process: "refund", Claim: "success", Truth: matrix.Truth{Outcome: "FAIL", Policy: "PASS"}},
		rows[1],
		{ID: "refund/permission_denied", Process: "refund", Claim: "failure", Truth: matrix.Truth{Outcome: "FAIL", Policy: "PASS"},
			Refused: []string{"POST /payments/refunds attempt 1: 403 forbidden"}},
	})
	require.Equal(t, "sandbox", sandboxRes.PaymentsBackend)
	require.Equal(t, "latest", report.FileBase(sandboxRes))
	require.Contains(t, report.Markdown(sandboxRes), "payments_backend `sandbox`")
	require.NotContains(t, report.Markdown(sandboxRes), "Refused by Stripe")

	res := report.NewResults("def", testTime, testTime, 4, rows)
	report.SetPayments(&res, stripepay.NameStripeFake)
	report.CompareWithSandbox(&res, sandboxRes)
	require.Equal(t, "latest_stripe", report.FileBase(res))
	require.Len(t, res.DiffersFromSandbox, 1)
	require.True(t, strings.HasPrefix(res.DiffersFromSandbox[0], "refund/retried_twice: "), res.DiffersFromSandbox[0])
	md := report.Markdown(res)
	for _, want := range []string{"payments_backend `stripe-fake`", stripepay.Notice, "## Refused by Stripe",
		"| refund/retried_twice | POST /payments/refunds attempt 2: 400 charge_already_refunded (Stripe) |",
		"not Stripe's", "- refund/permission_denied: POST /payments/refunds attempt 1: 403 forbidden",
		"Compared with the sandbox run of commit abc"} {
		require.Contains(t, md, want)
	}
	require.NotContains(t, md, "| refund/permission_denied | POST", "not a Stripe refusal")

	// Results from before refusals were recorded: only truth and claims.
	old := sandboxRes
	old.PaymentsBackend = ""
	old.Scenarios = []matrix.Row{rows[2]}
	old.Scenarios[0].Refused = nil
	report.CompareWithSandbox(&res, old)
	require.Empty(t, res.DiffersFromSandbox)
	require.Contains(t, res.ComparedWith, "predate recorded refusals")
	dir := t.TempDir()
	require.NoError(t, report.WriteFiles(dir, res))
	js := readFile(t, dir+"/latest_stripe.json")
	require.Contains(t, js, `"payments_backend": "stripe-fake"`)
	require.Contains(t, readFile(t, dir+"/latest_stripe.md"), "payments_backend `stripe-fake`")
}

var testTime = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestPrepareRefusesStripeWithoutKey: Prepare selects the backend before it
// creates anything; stripe without a key is a non-retryable error that
// names the variable (and no store is touched: Store is nil here).
func TestPrepareRefusesStripeWithoutKey(t *testing.T) {
	acts := &harness.Activities{Contracts: sbcontracts.FS, Host: &harness.Host{}, Getenv: func(string) string { return "" }}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	_, err := env.ExecuteActivity(acts.Prepare, harness.PrepareInput{RunID: "r", ScenarioID: "refund/baseline", Payments: stripepay.NameStripe})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.True(t, appErr.NonRetryable())
	require.Contains(t, err.Error(), stripepay.EnvKey)
}
