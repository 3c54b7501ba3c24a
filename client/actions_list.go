package client

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/commitlayer/commitlayer"
)

// ActionFilter selects actions for ListActions; zero fields do not filter.
type ActionFilter struct {
	Status       string // PASS, FAIL, UNKNOWN or "pending" (no verdict yet)
	Provisional  *bool  // whether the current verdict is provisional
	Contract     string
	Agent        string
	Subject      commitlayer.Subject
	Since, Until time.Time // Since ≤ requested_at < Until
	Limit        int       // the page size (server default 50, at most 500)
	Cursor       string    // a page's NextCursor
}

func (f ActionFilter) query() url.Values {
	q := values("status", f.Status, "contract", f.Contract, "agent", f.Agent, "subject", string(f.Subject),
		"since", rfc3339(f.Since), "until", rfc3339(f.Until), "cursor", f.Cursor)
	if f.Provisional != nil {
		q.Set("provisional", strconv.FormatBool(*f.Provisional))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// ListedAction is one action of a list with its current verdict (nil and
// Status "pending" until the first one).
type ListedAction struct {
	ID                string               `json:"id"`
	Contract          string               `json:"contract"`
	ContractVersion   int                  `json:"contract_version,omitzero"`
	Agent             string               `json:"agent"`
	Subject           commitlayer.Subject  `json:"subject"`
	Params            commitlayer.Attrs    `json:"params"`
	RequestedAt       time.Time            `json:"requested_at"`
	Claim             commitlayer.Claim    `json:"claim"`
	SettlesAt         time.Time            `json:"settles_at"`
	WatchUntil        time.Time            `json:"watch_until"`
	CreatedAt         time.Time            `json:"created_at"`
	Status            string               `json:"status"`
	Verification      string               `json:"verification"`
	VerificationError string               `json:"verification_error,omitempty"`
	Verdict           *commitlayer.Verdict `json:"verdict"`
}

// ActionList is one page; NextCursor is nil on the last.
type ActionList struct {
	Actions    []ListedAction `json:"actions"`
	NextCursor *string        `json:"next_cursor"`
}

// ListActions lists the tenant's actions, newest first, a page at a time.
func (c *Client) ListActions(ctx context.Context, f ActionFilter) (ActionList, error) {
	var out ActionList
	_, err := c.do(ctx, get("/v1/actions", f.query()), &out)
	return out, err
}

// StatsQuery asks ActionStats for counts per bucket; zero fields take the
// server's defaults.
type StatsQuery struct {
	Bucket          time.Duration
	Since, Until    time.Time
	Contract, Agent string
}

// StatsBucket counts one contract's and agent's actions in a bucket.
type StatsBucket struct {
	Start    time.Time                `json:"start"`
	Contract string                   `json:"contract"`
	Agent    string                   `json:"agent"`
	Counts   commitlayer.StatusCounts `json:"counts"`
}

// ActionStats is the answer of GET /v1/actions/stats.
type ActionStats struct {
	Bucket  string                   `json:"bucket"`
	Since   time.Time                `json:"since"`
	Until   time.Time                `json:"until"`
	Buckets []StatsBucket            `json:"buckets"`
	Totals  commitlayer.StatusCounts `json:"totals"`
}

// ActionStats counts the tenant's actions by current verdict per time
// bucket, contract and agent.
func (c *Client) ActionStats(ctx context.Context, sq StatsQuery) (ActionStats, error) {
	q := values("since", rfc3339(sq.Since), "until", rfc3339(sq.Until), "contract", sq.Contract, "agent", sq.Agent)
	if sq.Bucket > 0 {
		q.Set("bucket", sq.Bucket.String())
	}
	var out ActionStats
	_, err := c.do(ctx, get("/v1/actions/stats", q), &out)
	return out, err
}
