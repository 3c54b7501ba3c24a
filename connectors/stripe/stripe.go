// Package stripe pulls a Stripe account's refunds, charges, payouts and
// disputes as facts, through stripe-go v79's list endpoints: a Client whose
// Pull(ctx, source, cursor, limit) returns facts with the cursor to store.
//
// The cursor is a string (compact JSON) that survives restarts. For each
// resource it holds a watermark: the newest created second fully read and
// the ids read in that second. A pull lists created >= watermark, newest
// first, page by page with starting_after; while a sweep is under way the
// cursor also holds its position, so a restart resumes it. A fact is the
// object as first seen (its id is the external id); later changes to an
// object already read (a refund going from pending to succeeded) are not
// re-read by the list endpoints.
//
// Keys: a verifier only reads, so restricted keys (rk_test_…, rk_live_…)
// and test secret keys (sk_test_…) are accepted and a live secret key
// (sk_live_…) is refused before any call. The key is never put in an error
// or a log line.
package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/stripeapi"
)

// Kind is the connector kind ("kind":"stripe" on POST /v1/connectors).
const Kind = "stripe"

var (
	// ErrLiveSecretKey refuses sk_live_ keys: a verifier must not hold a
	// key that can move money.
	ErrLiveSecretKey = errors.New("a live secret key (sk_live_…) is refused: create a restricted key (rk_live_…) " +
		"with read access to charges, refunds, payouts and disputes")
	// ErrBadKey means the value is not a usable Stripe key.
	ErrBadKey = errors.New("api_key must be a Stripe restricted key (rk_test_…, rk_live_…) or a test secret key (sk_test_…)")
	// ErrUnauthorized means Stripe refused the key (401) or its permissions
	// (403). Retrying does not help.
	ErrUnauthorized = errors.New("stripe refused the connector's key")
	// ErrRateLimited means Stripe kept answering 429 through every retry.
	ErrRateLimited = errors.New("stripe rate limited the connector")
	// ErrUnreachable means Stripe could not be reached or answered 5xx
	// through every retry.
	ErrUnreachable = errors.New("stripe unreachable")
	// ErrBadResponse means Stripe refused the request (400/404) or the
	// cursor is not one this package wrote.
	ErrBadResponse = errors.New("stripe gave a bad response")
)

var keyPattern = regexp.MustCompile(`^(rk_test|rk_live|sk_test)_[A-Za-z0-9]+$`)

// CheckKey accepts rk_test_, rk_live_ and sk_test_ keys and refuses
// sk_live_ with ErrLiveSecretKey; the error never holds the key.
func CheckKey(key string) error {
	switch {
	case strings.HasPrefix(key, "sk_live_"):
		return ErrLiveSecretKey
	case !keyPattern.MatchString(key):
		return ErrBadKey
	}
	return nil
}

// Defaults.
const (
	DefaultLimit       = 100 // Stripe's largest page
	DefaultMaxAttempts = 4
	DefaultBaseDelay   = 500 * time.Millisecond
	MaxDelay           = 8 * time.Second
)

// Client pulls one Stripe account.
type Client struct {
	// HTTP does the requests; nil means a client with a 30 s timeout.
	HTTP *http.Client
	// BaseURL is the API address; "" means api.stripe.com.
	BaseURL string
	// Key is the account's key (see CheckKey).
	Key string
	// MaxAttempts bounds the tries of one page on 429, 5xx and network
	// errors; 0 means DefaultMaxAttempts.
	MaxAttempts int
	// BaseDelay is the first backoff, doubled per retry up to MaxDelay;
	// 0 means DefaultBaseDelay.
	BaseDelay time.Duration
	// Sleep waits between tries; nil means a timer that honours ctx.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Resources are the lists pulled, in this order.
var Resources = []string{"refunds", "charges", "payouts", "disputes"}

// resCursor is one resource's position.
type resCursor struct {
	// Since is the watermark: objects created at or after it are listed.
	Since int64 `json:"since,omitempty"`
	// Seen are the ids created at Since already read.
	Seen []string `json:"seen,omitempty"`
	// After is the sweep's position (starting_after) while it is under way.
	After string `json:"after,omitempty"`
	// Top and TopIDs are the newest created second of the sweep and the
	// ids read in it; they become Since and Seen when the sweep ends.
	Top    int64    `json:"top,omitempty"`
	TopIDs []string `json:"top_ids,omitempty"`
}

type cursor struct {
	V   int                  `json:"v"`
	Res map[string]resCursor `json:"res,omitempty"`
}

func parseCursor(s string) (cursor, error) {
	c := cursor{V: 1, Res: map[string]resCursor{}}
	if s == "" {
		return c, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.V != 1 {
		return cursor{}, fmt.Errorf("%w: cursor %.60q is not a stripe connector cursor", ErrBadResponse, s)
	}
	if c.Res == nil {
		c.Res = map[string]resCursor{}
	}
	for name := range c.Res {
		if !slices.Contains(Resources, name) {
			return cursor{}, fmt.Errorf("%w: cursor names an unknown resource %q", ErrBadResponse, name)
		}
	}
	return c, nil
}

func (c cursor) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// listed is one object of a list, as the connector needs it.
type listed struct {
	id      string
	created int64
	fact    commitlayer.Fact
}

// Pull reads one page (at most limit objects, DefaultLimit when ≤ 0) of
// each resource from cursor, as facts of source, with the next cursor; More
// is true while a resource's sweep has pages left. On error the stored
// cursor stays where it was.
func (c *Client) Pull(ctx context.Context, source string, cur string, limit int) (commitlayer.FactPage, error) {
	if err := CheckKey(c.Key); err != nil {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s: %w", source, err)
	}
	if !commitlayer.ValidName(source) {
		return commitlayer.FactPage{}, fmt.Errorf("pull %q: source name may only hold letters, digits, '_', '-' and '.'", source)
	}
	cc, err := parseCursor(cur)
	if err != nil {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s: %w", source, err)
	}
	if limit <= 0 || limit > DefaultLimit {
		limit = DefaultLimit
	}
	sc, err := stripeapi.New(stripeapi.Config{Key: c.Key, BaseURL: c.BaseURL, HTTP: c.HTTP})
	if err != nil {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s: %w", source, err)
	}
	var page commitlayer.FactPage
	for _, res := range Resources {
		rc := cc.Res[res]
		items, hasMore, err := c.listPage(ctx, sc, source, res, rc, limit)
		if err != nil {
			return commitlayer.FactPage{}, fmt.Errorf("pull %s: list %s: %w", source, res, err)
		}
		for _, it := range items {
			if it.created == rc.Since && slices.Contains(rc.Seen, it.id) {
				continue // read by an earlier sweep
			}
			if it.created < rc.Since {
				continue // a list that ignored created[gte]; never re-emit
			}
			page.Facts = append(page.Facts, it.fact)
		}
		for _, it := range items {
			switch {
			case it.created > rc.Top:
				rc.Top, rc.TopIDs = it.created, []string{it.id}
			case it.created == rc.Top && !slices.Contains(rc.TopIDs, it.id):
				rc.TopIDs = append(rc.TopIDs, it.id)
			}
		}
		if hasMore && len(items) > 0 {
			rc.After = items[len(items)-1].id
			page.More = true
		} else {
			// The sweep is over: its newest second becomes the watermark.
			if rc.Top > rc.Since {
				rc.Since, rc.Seen = rc.Top, rc.TopIDs
			} else if rc.Top == rc.Since && rc.Top != 0 {
				for _, id := range rc.TopIDs {
					if !slices.Contains(rc.Seen, id) {
						rc.Seen = append(rc.Seen, id)
					}
				}
			}
			rc.After, rc.Top, rc.TopIDs = "", 0, nil
		}
		cc.Res[res] = rc
	}
	page.Next = cc.String()
	return page, nil
}

// listPage fetches one page of a resource, retrying 429, 5xx and network
// errors with backoff.
func (c *Client) listPage(ctx context.Context, sc *client.API, source, res string, rc resCursor, limit int) ([]listed, bool, error) {
	attempts := c.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultMaxAttempts
	}
	delay := c.BaseDelay
	if delay <= 0 {
		delay = DefaultBaseDelay
	}
	sleep := c.Sleep
	if sleep == nil {
		sleep = func(ctx context.Context, d time.Duration) error {
			select {
			case <-time.After(d):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	var lastErr error
	for attempt := 1; ; attempt++ {
		items, more, err := fetch(ctx, sc, source, res, rc, limit)
		if err == nil {
			return items, more, nil
		}
		kind := classify(err)
		lastErr = fmt.Errorf("%w: %s", kind, stripeapi.Describe(err))
		if kind == ErrUnauthorized || kind == ErrBadResponse || ctx.Err() != nil || attempt >= attempts {
			if attempt > 1 {
				lastErr = fmt.Errorf("%w (after %d tries)", lastErr, attempt)
			}
			return nil, false, lastErr
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, false, fmt.Errorf("%w: %w", lastErr, err)
		}
		delay = min(2*delay, MaxDelay)
	}
}

// classify maps a stripe-go error to the connector's error kinds.
func classify(err error) error {
	se := stripeapi.AsError(err)
	switch {
	case se == nil:
		return ErrUnreachable
	case se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden:
		return ErrUnauthorized
	case se.HTTPStatusCode == http.StatusTooManyRequests:
		return ErrRateLimited
	case se.HTTPStatusCode >= 500 || se.HTTPStatusCode == 0:
		return ErrUnreachable
	}
	return ErrBadResponse
}

func listParams(ctx context.Context, rc resCursor, limit int) (stripego.ListParams, *stripego.RangeQueryParams) {
	lp := stripego.ListParams{Context: ctx, Limit: stripego.Int64(int64(limit)), Single: true}
	if rc.After != "" {
		lp.StartingAfter = stripego.String(rc.After)
	}
	var created *stripego.RangeQueryParams
	if rc.Since > 0 {
		created = &stripego.RangeQueryParams{GreaterThanOrEqual: rc.Since}
	}
	return lp, created
}

// page drains a single-page iterator.
func page(it *stripego.Iter, conv func(any) (listed, error)) ([]listed, bool, error) {
	var out []listed
	for it.Next() {
		l, err := conv(it.Current())
		if err != nil {
			return nil, false, err
		}
		out = append(out, l)
	}
	if err := it.Err(); err != nil {
		return nil, false, err
	}
	more := false
	if m := it.Meta(); m != nil {
		more = m.HasMore
	}
	return out, more, nil
}

func fetch(ctx context.Context, sc *client.API, source, res string, rc resCursor, limit int) ([]listed, bool, error) {
	lp, created := listParams(ctx, rc, limit)
	switch res {
	case "refunds":
		it := sc.Refunds.List(&stripego.RefundListParams{ListParams: lp, CreatedRange: created})
		return page(it.Iter, func(v any) (listed, error) { return refundFact(source, v.(*stripego.Refund)) })
	case "charges":
		it := sc.Charges.List(&stripego.ChargeListParams{ListParams: lp, CreatedRange: created})
		return page(it.Iter, func(v any) (listed, error) { return chargeFact(source, v.(*stripego.Charge)) })
	case "payouts":
		it := sc.Payouts.List(&stripego.PayoutListParams{ListParams: lp, CreatedRange: created})
		return page(it.Iter, func(v any) (listed, error) { return payoutFact(source, v.(*stripego.Payout)) })
	case "disputes":
		it := sc.Disputes.List(&stripego.DisputeListParams{ListParams: lp, CreatedRange: created})
		return page(it.Iter, func(v any) (listed, error) { return disputeFact(source, v.(*stripego.Dispute)) })
	}
	return nil, false, fmt.Errorf("%w: unknown resource %q", ErrBadResponse, res)
}

// Facts.

// subjectOf picks a fact's subject: the order named by metadata order_id
// when the object carries one, else the PaymentIntent, else the charge.
func subjectOf(md map[string]string, pi, ch string) (commitlayer.Subject, []commitlayer.Subject) {
	var links []commitlayer.Subject
	var subject commitlayer.Subject
	if o := md["order_id"]; o != "" && !strings.ContainsAny(o, ":/ ") {
		subject = commitlayer.Subject("order:" + o)
	}
	for _, s := range []commitlayer.Subject{sub("payment_intent", pi), sub("charge", ch)} {
		switch {
		case s == "":
		case subject == "":
			subject = s
		default:
			links = append(links, s)
		}
	}
	return subject, links
}

func sub(typ, id string) commitlayer.Subject {
	if id == "" {
		return ""
	}
	return commitlayer.Subject(typ + ":" + id)
}

func fact(source, typ, id string, created int64, subject commitlayer.Subject, links []commitlayer.Subject, attrs commitlayer.Attrs) (listed, error) {
	f := commitlayer.Fact{Source: source, Type: typ, Subject: subject, ExternalID: id,
		OccurredAt: time.Unix(created, 0).UTC(), Attrs: attrs, Links: links}
	if err := f.Validate(); err != nil {
		return listed{}, fmt.Errorf("%w: %s %s: %v", ErrBadResponse, typ, id, err)
	}
	return listed{id: id, created: created, fact: f}, nil
}

func idOfPI(p *stripego.PaymentIntent) string {
	if p == nil {
		return ""
	}
	return p.ID
}

func idOfCharge(c *stripego.Charge) string {
	if c == nil {
		return ""
	}
	return c.ID
}

func refundFact(source string, r *stripego.Refund) (listed, error) {
	subject, links := subjectOf(r.Metadata, idOfPI(r.PaymentIntent), idOfCharge(r.Charge))
	typ := "refund_created"
	if r.Status == stripego.RefundStatusFailed || r.Status == stripego.RefundStatusCanceled {
		typ = "refund_failed"
	}
	return fact(source, typ, r.ID, r.Created, subject, links, commitlayer.Attrs{
		"refund_id": r.ID, "amount": r.Amount, "currency": strings.ToUpper(string(r.Currency)),
		"status": string(r.Status), "reason": string(r.Reason), "charge_id": idOfCharge(r.Charge),
		"payment_intent": idOfPI(r.PaymentIntent),
	})
}

func chargeFact(source string, c *stripego.Charge) (listed, error) {
	subject, links := subjectOf(c.Metadata, idOfPI(c.PaymentIntent), c.ID)
	typ := "charge_pending"
	switch {
	case c.Status == stripego.ChargeStatusSucceeded && c.Captured:
		typ = "charge_captured"
	case c.Status == stripego.ChargeStatusFailed:
		typ = "charge_failed"
	}
	return fact(source, typ, c.ID, c.Created, subject, links, commitlayer.Attrs{
		"charge_id": c.ID, "amount": c.Amount, "amount_refunded": c.AmountRefunded,
		"currency": strings.ToUpper(string(c.Currency)), "status": string(c.Status), "refunded": c.Refunded,
		"disputed": c.Disputed, "payment_intent": idOfPI(c.PaymentIntent),
	})
}

func payoutFact(source string, p *stripego.Payout) (listed, error) {
	return fact(source, "payout_"+string(p.Status), p.ID, p.Created, sub("payout", p.ID), nil, commitlayer.Attrs{
		"payout_id": p.ID, "amount": p.Amount, "currency": strings.ToUpper(string(p.Currency)),
		"status": string(p.Status), "arrival_date": time.Unix(p.ArrivalDate, 0).UTC().Format(time.RFC3339),
	})
}

func disputeFact(source string, d *stripego.Dispute) (listed, error) {
	subject, links := subjectOf(d.Metadata, idOfPI(d.PaymentIntent), idOfCharge(d.Charge))
	if subject == "" {
		subject = sub("dispute", d.ID)
	}
	return fact(source, "dispute_created", d.ID, d.Created, subject, links, commitlayer.Attrs{
		"dispute_id": d.ID, "amount": d.Amount, "currency": strings.ToUpper(string(d.Currency)),
		"status": string(d.Status), "reason": string(d.Reason), "charge_id": idOfCharge(d.Charge),
		"payment_intent": idOfPI(d.PaymentIntent),
	})
}
