// Package stripepay is the sandbox payments system's Stripe backend
// (`--payments stripe` and `stripe-fake`): charges are confirmed Stripe
// PaymentIntents, the agent's refunds are Stripe refunds, and the payments
// event feed reconciles Stripe's refunds before each answer. Billing stops
// and refund reversals stay local (sandbox/systems.FakePayments), and every
// event is stamped on the enterprise's virtual clock, not Stripe's created.
//
// It speaks to Stripe through stripe-go v79 (internal/stripeapi) with
// network retries off: the retries measured are the agent's.
package stripepay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"

	stripe "github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/stripeapi"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// Environment variables.
const (
	// EnvKey holds the Stripe test secret key; it is read from nowhere else.
	EnvKey = "STRIPE_TEST_SECRET_KEY"
	// EnvBase overrides the API address (the fake, stripe-mock).
	EnvBase = "STRIPE_API_BASE"
)

// Backend names, as results carry them in payments_backend.
const (
	NameStripe     = "stripe"
	NameStripeFake = "stripe-fake"
	NameSandbox    = "sandbox"
)

// Notice says up front what a Stripe run covers.
const Notice = "payments on Stripe test mode: charges are confirmed PaymentIntents (pm_card_visa) and refunds are Stripe refunds; " +
	"billing stops, refund reversals and ledger payouts stay in the sandbox, so only refund scenarios run; " +
	"event times are on the sandbox's virtual clock, not Stripe's created"

var (
	// ErrNoKey means STRIPE_TEST_SECRET_KEY is unset.
	ErrNoKey = errors.New(EnvKey + " is not set")
	// ErrNotTestKey means the key is not a Stripe test secret key. The
	// error never shows the key.
	ErrNotTestKey = errors.New(EnvKey + " must be a Stripe test-mode secret key (sk_test_…); live and restricted keys are refused")
)

var testKeyPattern = regexp.MustCompile(`^sk_test_[A-Za-z0-9]+$`)

// CheckKey accepts only a well-formed test secret key.
func CheckKey(key string) error {
	switch {
	case key == "":
		return ErrNoKey
	case !testKeyPattern.MatchString(key):
		return ErrNotTestKey
	}
	return nil
}

// Config is a Stripe backend's configuration.
type Config struct {
	// Key is a Stripe test secret key (sk_test_…).
	Key string
	// BaseURL is the API address; "" means api.stripe.com.
	BaseURL string
	// HTTP does the requests; nil means a client with a timeout.
	HTTP *http.Client
	// Logger; nil means slog.Default(). The key is never logged.
	Logger *slog.Logger
}

// ConfigFromEnv reads STRIPE_TEST_SECRET_KEY and STRIPE_API_BASE and checks
// the key before anything is sent.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{Key: strings.TrimSpace(getenv(EnvKey)), BaseURL: strings.TrimSpace(getenv(EnvBase))}
	if err := CheckKey(cfg.Key); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Client is a checked Stripe connection; each enterprise gets its own
// Backend from it.
type Client struct {
	sc  *client.API
	log *slog.Logger
}

// New checks cfg (the key first: nothing is sent with a bad one) and builds
// the stripe-go client. It makes no request.
func New(cfg Config) (*Client, error) {
	if err := CheckKey(cfg.Key); err != nil {
		return nil, fmt.Errorf("stripe payments: %w", err)
	}
	sc, err := stripeapi.New(stripeapi.Config{Key: cfg.Key, BaseURL: cfg.BaseURL, HTTP: cfg.HTTP})
	if err != nil {
		return nil, fmt.Errorf("stripe payments: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Client{sc: sc, log: log}, nil
}

// Backend returns a payments backend over one enterprise's payments system:
// the function sandbox.Options.Payments takes.
func (c *Client) Backend(sys *systems.System) systems.PaymentsBackend {
	return c.NewBackend(sys)
}

// NewBackend is Backend with the concrete type.
func (c *Client) NewBackend(sys *systems.System) *Backend {
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	return &Backend{sc: c.sc, log: c.log, sys: sys, local: systems.NewFakePayments(sys), run: hex.EncodeToString(nonce[:])}
}

// Backend is the Stripe PaymentsBackend of one enterprise.
type Backend struct {
	sc    *client.API
	log   *slog.Logger
	sys   *systems.System
	local *systems.FakePayments
	// run namespaces the agent's idempotency keys on Stripe, where keys
	// live for a day across the whole account: two runs whose agents send
	// the same key must not collide, while a key repeated within one run
	// reaches Stripe as the same key.
	run string

	tableOnce sync.Once
	tableErr  error
}

var (
	_ systems.PaymentsBackend = (*Backend)(nil)
	_ systems.ChargeSeeder    = (*Backend)(nil)
	_ systems.Reconciler      = (*Backend)(nil)
)

const intentsSchema = `CREATE TABLE IF NOT EXISTS stripe_payment_intents (
	order_id TEXT PRIMARY KEY,
	payment_intent TEXT NOT NULL UNIQUE,
	charge_id TEXT NOT NULL
)`

func (b *Backend) table(ctx context.Context) error {
	b.tableOnce.Do(func() {
		if _, err := b.sys.DB().ExecContext(ctx, intentsSchema); err != nil {
			b.tableErr = fmt.Errorf("create stripe_payment_intents: %w", err)
		}
	})
	return b.tableErr
}

// SeedCharge creates and confirms the order's PaymentIntent (card only, so
// no return URL is needed) and keeps its id in the payments file.
func (b *Backend) SeedCharge(ctx context.Context, c systems.SeedCharge) (string, error) {
	if err := b.table(ctx); err != nil {
		return "", err
	}
	p := &stripe.PaymentIntentParams{
		Amount:             stripe.Int64(c.Amount),
		Currency:           stripe.String(strings.ToLower(c.Currency)),
		PaymentMethod:      stripe.String("pm_card_visa"),
		PaymentMethodTypes: stripe.StringSlice([]string{"card"}),
		Confirm:            stripe.Bool(true),
	}
	p.AddMetadata("order_id", c.OrderID)
	p.Context = ctx
	pi, err := b.sc.PaymentIntents.New(p)
	if err != nil {
		return "", fmt.Errorf("create PaymentIntent: %s", stripeapi.Describe(err))
	}
	if pi.Status != stripe.PaymentIntentStatusSucceeded || pi.LatestCharge == nil || pi.LatestCharge.ID == "" {
		return "", fmt.Errorf("create PaymentIntent %s: status %s, not succeeded with a charge", pi.ID, pi.Status)
	}
	if _, err := b.sys.DB().ExecContext(ctx, `INSERT INTO stripe_payment_intents(order_id, payment_intent, charge_id) VALUES (?, ?, ?)`,
		c.OrderID, pi.ID, pi.LatestCharge.ID); err != nil {
		return "", fmt.Errorf("keep PaymentIntent %s: %w", pi.ID, err)
	}
	return pi.LatestCharge.ID, nil
}

// PaymentIntent returns the PaymentIntent seeded for an order.
func (b *Backend) PaymentIntent(ctx context.Context, orderID string) (string, error) {
	var id string
	err := b.sys.DB().QueryRowContext(ctx, `SELECT payment_intent FROM stripe_payment_intents WHERE order_id = ?`, orderID).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("PaymentIntent of order %s: %w", orderID, err)
	}
	return id, nil
}

// Charge reads the order's charge as the sandbox mirrors it (amount and
// what has been refunded through the agent, the operator or reconciliation).
func (b *Backend) Charge(ctx context.Context, orderID string) (systems.Charge, error) {
	return b.local.Charge(ctx, orderID)
}

// StopBilling stays local: nothing is sent to Stripe.
func (b *Backend) StopBilling(tx *systems.Tx, req systems.StopBillingRequest) (systems.BillingStop, error) {
	return b.local.StopBilling(tx, req)
}

// stripeKey is the Idempotency-Key sent to Stripe for the agent's key.
func (b *Backend) stripeKey(agentKey string) string {
	k := "cl-" + b.run + "-" + agentKey
	if len(k) > 255 {
		sum := sha256.Sum256([]byte(agentKey))
		k = "cl-" + b.run + "-sha256-" + hex.EncodeToString(sum[:])
	}
	return k
}

// CreateRefund creates a Stripe refund on the order's PaymentIntent and
// mirrors it locally with its refund_created event. The agent's
// Idempotency-Key goes to Stripe (namespaced to this run); without one, the
// request goes without one, so a retry can refund twice as on Stripe.
func (b *Backend) CreateRefund(tx *systems.Tx, req systems.RefundRequest) (systems.Refund, error) {
	if err := systems.ValidateRefund(req); err != nil {
		return systems.Refund{}, err
	}
	var c systems.Charge
	var pi string
	err := tx.QueryRow(`SELECT c.id, c.order_id, c.amount, c.refunded, c.currency, s.payment_intent
		FROM charges c JOIN stripe_payment_intents s ON s.order_id = c.order_id WHERE c.order_id = ?`, req.OrderID).
		Scan(&c.ID, &c.OrderID, &c.Amount, &c.Refunded, &c.Currency, &pi)
	if errors.Is(err, sql.ErrNoRows) {
		return systems.Refund{}, &systems.APIError{Status: http.StatusNotFound, Code: systems.CodeNotFound,
			Message: fmt.Sprintf("no charge for order %q", req.OrderID)}
	}
	if err != nil {
		return systems.Refund{}, fmt.Errorf("read charge of order %s: %w", req.OrderID, err)
	}
	if req.Currency != c.Currency {
		// Stripe refunds in the charge's currency and takes none; the
		// sandbox's contract refuses a mismatch, so it is checked here.
		return systems.Refund{}, &systems.APIError{Status: http.StatusBadRequest, Code: systems.CodeCurrencyMismatch,
			Message: fmt.Sprintf("refund currency %s does not match the charge's %s", req.Currency, c.Currency)}
	}
	ctx := tx.Ctx()
	p := &stripe.RefundParams{PaymentIntent: stripe.String(pi), Amount: stripe.Int64(req.Amount)}
	p.AddMetadata("order_id", req.OrderID)
	if req.Reason != "" {
		p.AddMetadata("reason", commitlayer.Clip(req.Reason, 499)) // Stripe holds 500 characters; Clip adds one
	}
	if req.IdempotencyKey != "" {
		p.SetIdempotencyKey(b.stripeKey(req.IdempotencyKey))
	} else {
		ctx = stripeapi.WithoutIdempotencyKey(ctx)
	}
	p.Context = ctx
	rf, err := b.sc.Refunds.New(p)
	if err != nil {
		return systems.Refund{}, b.refundError(ctx, req, c, err)
	}
	out := systems.Refund{ID: rf.ID, ChargeID: c.ID, OrderID: c.OrderID, Amount: rf.Amount,
		Currency: strings.ToUpper(string(rf.Currency)), Reason: req.Reason, Status: string(rf.Status)}
	if err := b.mirror(tx, out); err != nil {
		return systems.Refund{}, err
	}
	return out, nil
}

// mirror writes a Stripe refund into the local tables and appends its
// refund_created event (keyed downstream by the payments event id; the
// refund id is in its attrs).
func (b *Backend) mirror(tx *systems.Tx, rf systems.Refund) error {
	if _, err := tx.Exec(`INSERT INTO refunds(id, charge_id, order_id, amount, currency, reason, status, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, rf.ID, rf.ChargeID, rf.OrderID, rf.Amount, rf.Currency, rf.Reason, rf.Status,
		tx.Now().UTC().Format(systems.TimeFormat)); err != nil {
		return fmt.Errorf("mirror refund %s: %w", rf.ID, err)
	}
	if _, err := tx.Exec(`UPDATE charges SET refunded = refunded + ? WHERE id = ?`, rf.Amount, rf.ChargeID); err != nil {
		return fmt.Errorf("mirror refund %s: %w", rf.ID, err)
	}
	return tx.Emit("refund_created", "order:"+rf.OrderID, map[string]any{
		"refund_id": rf.ID, "amount": rf.Amount, "currency": rf.Currency, "reason": rf.Reason, "status": rf.Status,
	})
}

// refundError turns Stripe's answer into the sandbox's: its two refund
// refusals keep their codes (400, stored under the agent's key), a key
// reused with other parameters is the sandbox's 409, rate limits pass as
// 429, and anything else is a 502 whose message names no key.
func (b *Backend) refundError(ctx context.Context, req systems.RefundRequest, c systems.Charge, err error) error {
	desc := stripeapi.Describe(err)
	b.log.WarnContext(ctx, "stripe refund refused", "order_id", req.OrderID, "stripe", desc)
	se := stripeapi.AsError(err)
	if se == nil {
		return &systems.APIError{Status: http.StatusBadGateway, Code: "payments_backend_unavailable",
			Message: "the payments backend (Stripe) could not be reached; the refund may or may not have been made"}
	}
	switch {
	case se.Code == stripe.ErrorCodeChargeAlreadyRefunded:
		return systems.Decline(systems.CodeChargeAlreadyRefunded, "charge %s has already been refunded (Stripe)", c.ID)
	case se.Code == stripe.ErrorCodeAmountTooLarge:
		return systems.Decline(systems.CodeAmountTooLarge, "refund of %d is greater than what is left on charge %s (Stripe)", req.Amount, c.ID)
	case se.Type == stripe.ErrorTypeIdempotency:
		return &systems.APIError{Status: http.StatusConflict, Code: systems.CodeIdempotencyKeyReused,
			Message: "Idempotency-Key was used with another request (Stripe)"}
	case se.HTTPStatusCode == http.StatusTooManyRequests:
		return &systems.APIError{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: "the payments backend (Stripe) is rate limiting"}
	case se.HTTPStatusCode == http.StatusBadRequest:
		return &systems.APIError{Status: http.StatusBadRequest, Code: systems.CodeInvalidRequest, Message: desc}
	}
	return &systems.APIError{Status: http.StatusBadGateway, Code: "payments_backend_error", Message: desc}
}

// Reconcile lists Stripe's refunds of every seeded PaymentIntent and
// mirrors each one not seen yet (made in the dashboard, by another client,
// or whose local write was lost), oldest first, with a refund_created event
// on the virtual clock. A refund is appended once: one already mirrored
// keeps its event and sequence number. It runs as one payments write, so it
// never interleaves with an agent's refund.
func (b *Backend) Reconcile(ctx context.Context) error {
	if err := b.table(ctx); err != nil {
		return err
	}
	return b.sys.Write(ctx, func(tx *systems.Tx) error {
		type intent struct{ order, pi, charge, currency string }
		rows, err := b.sys.DB().QueryContext(ctx, `SELECT s.order_id, s.payment_intent, s.charge_id, c.currency
			FROM stripe_payment_intents s JOIN charges c ON c.order_id = s.order_id ORDER BY s.rowid`)
		if err != nil {
			return fmt.Errorf("reconcile: read PaymentIntents: %w", err)
		}
		var intents []intent
		for rows.Next() {
			var in intent
			if err := rows.Scan(&in.order, &in.pi, &in.charge, &in.currency); err != nil {
				rows.Close()
				return fmt.Errorf("reconcile: read PaymentIntents: %w", err)
			}
			intents = append(intents, in)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("reconcile: read PaymentIntents: %w", err)
		}
		for _, in := range intents {
			lp := &stripe.RefundListParams{PaymentIntent: stripe.String(in.pi)}
			lp.Limit = stripe.Int64(100)
			lp.Context = ctx
			it := b.sc.Refunds.List(lp)
			var fresh []*stripe.Refund
			for it.Next() {
				rf := it.Refund()
				var n int
				if err := tx.QueryRow(`SELECT COUNT(*) FROM refunds WHERE id = ?`, rf.ID).Scan(&n); err != nil {
					return fmt.Errorf("reconcile: %w", err)
				}
				if n == 0 {
					fresh = append(fresh, rf)
				}
			}
			if err := it.Err(); err != nil {
				return &systems.APIError{Status: http.StatusBadGateway, Code: "payments_backend_error",
					Message: "reconcile refunds of " + in.pi + ": " + stripeapi.Describe(err)}
			}
			for i := len(fresh) - 1; i >= 0; i-- { // Stripe lists newest first
				rf := fresh[i]
				reason := rf.Metadata["reason"]
				if reason == "" {
					reason = string(rf.Reason)
				}
				if err := b.mirror(tx, systems.Refund{ID: rf.ID, ChargeID: in.charge, OrderID: in.order, Amount: rf.Amount,
					Currency: strings.ToUpper(string(rf.Currency)), Reason: reason, Status: string(rf.Status)}); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
