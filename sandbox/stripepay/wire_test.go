package stripepay_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/sandbox/stripefake/wirecheck"
)

// TestWireShapesAcceptedByStripeMock drives the backend through every path
// that talks to Stripe (seeding, refunds with and without a key, refusals,
// reconciliation) against the fake, then sends each distinct request shape
// it made to stripe-mock, which checks it against Stripe's OpenAPI spec.
// stripe-mock ignores values and keeps no state: behaviour is the fake's
// job, the shape is this test's.
func TestWireShapesAcceptedByStripeMock(t *testing.T) {
	mock := testenv.StripeMock(t)
	r := newRig(t)
	r.post(t, "/payments/refunds", `{"order_id":"o_1006","amount":100,"currency":"USD","reason":"missing item"}`, "k1")
	r.post(t, "/payments/refunds", `{"order_id":"o_1006","amount":100,"currency":"USD"}`, "")
	r.post(t, "/payments/refunds", `{"order_id":"o_1006","amount":999999,"currency":"USD"}`, "")
	r.events(t)
	shapes, err := wirecheck.Shapes(t.Context(), r.fake.Requests(), mock)
	require.NoError(t, err)
	t.Logf("stripe-mock accepted:\n%v", shapes)
	require.ElementsMatch(t, []string{
		"POST /v1/payment_intents amount&confirm&currency&metadata[order_id]&payment_method&payment_method_types[0] +Idempotency-Key",
		"POST /v1/refunds amount&metadata[order_id]&metadata[reason]&payment_intent +Idempotency-Key",
		"POST /v1/refunds amount&metadata[order_id]&payment_intent",
		"GET /v1/refunds limit&payment_intent",
	}, shapes, "every shape the backend sends is checked")
}
