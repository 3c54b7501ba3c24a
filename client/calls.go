package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Health calls GET /healthz: nil when the server and its store answer.
func (c *Client) Health(ctx context.Context) error {
	var out Health
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/healthz", safe: true}, &out); err != nil {
		return err
	}
	if out.Status != "ok" {
		return fmt.Errorf("GET /healthz: status %q", out.Status)
	}
	return nil
}

// CreateTenant creates a tenant (admin key); its APIKey is shown only here.
// Retried only when the server surely did not act.
func (c *Client) CreateTenant(ctx context.Context, name string) (Tenant, error) {
	var t Tenant
	_, err := c.do(ctx, c.post("/v1/admin/tenants", TenantInput{Name: name}, false), &t)
	return t, err
}

// ListTenants lists every tenant (admin key).
func (c *Client) ListTenants(ctx context.Context) ([]Tenant, error) {
	var out TenantList
	_, err := c.do(ctx, get("/v1/admin/tenants", nil), &out)
	return out.Tenants, err
}

// PutContract stores a YAML or JSON contract as a new version; created is
// false when the source equals the latest version's.
func (c *Client) PutContract(ctx context.Context, source []byte) (Contract, bool, error) {
	ct := "application/yaml"
	if t := bytes.TrimSpace(source); len(t) > 0 && t[0] == '{' {
		ct = "application/json"
	}
	r := c.post("/v1/contracts", source, true)
	r.contentType = ct
	var out Contract
	res, err := c.do(ctx, r, &out)
	return out, err == nil && res.status == http.StatusCreated, err
}

// ListContracts lists the latest version of each contract.
func (c *Client) ListContracts(ctx context.Context) ([]Contract, error) {
	var out ContractList
	_, err := c.do(ctx, get("/v1/contracts", nil), &out)
	return out.Contracts, err
}

// GetContract returns a contract with its source (version 0: the latest).
func (c *Client) GetContract(ctx context.Context, id string, version int) (Contract, error) {
	var q url.Values
	if version > 0 {
		q = url.Values{"version": {strconv.Itoa(version)}}
	}
	var out Contract
	_, err := c.do(ctx, get("/v1/contracts/"+url.PathEscape(id), q), &out)
	return out, err
}

// PostFacts ingests a batch of facts, whole or not at all.
func (c *Client) PostFacts(ctx context.Context, facts []commitlayer.Fact) (FactsResult, error) {
	var out FactsResult
	_, err := c.do(ctx, c.post("/v1/facts", FactBatch{Facts: facts}, true), &out)
	return out, err
}

// CreateConnector creates a source's connector; retried only when the
// server surely did not act.
func (c *Client) CreateConnector(ctx context.Context, in ConnectorInput) (Connector, error) {
	var out Connector
	_, err := c.do(ctx, c.post("/v1/connectors", in, false), &out)
	return out, err
}

// ListConnectors lists the tenant's connectors.
func (c *Client) ListConnectors(ctx context.Context) ([]Connector, error) {
	var out ConnectorList
	_, err := c.do(ctx, get("/v1/connectors", nil), &out)
	return out.Connectors, err
}

// ListSources lists each source's coverage.
func (c *Client) ListSources(ctx context.Context) ([]Source, error) {
	var out SourceList
	_, err := c.do(ctx, get("/v1/sources", nil), &out)
	return out.Sources, err
}

// RecordOptions tune RecordAction.
type RecordOptions struct {
	// IdempotencyKey is sent on every attempt; empty means a random one.
	// Derive it from the agent's step so a retry of the whole step answers
	// the same action.
	IdempotencyKey string
	// Wait asks the server to answer once the verdict is at this stage
	// (Accepted.Verdict), or when WaitTimeout (default 20 s, at most 60 s)
	// passed first.
	Wait        Stage
	WaitTimeout time.Duration
}

// RecordAction records an action and starts its verification; every
// attempt carries the same Idempotency-Key, so a retry starts nothing new.
func (c *Client) RecordAction(ctx context.Context, a commitlayer.Action, opts ...RecordOptions) (Accepted, error) {
	r := c.post("/v1/actions", actionInput(a), true)
	if len(opts) > 0 && opts[0].IdempotencyKey != "" {
		r.idempotencyKey = opts[0].IdempotencyKey
	}
	return c.accepted(ctx, r, opts)
}

// RecordAttempt records one more attempt of an action's call (an agent's
// retry) under key, its own Idempotency-Key: claim replaces the action's
// and trace (a JSON object, or nil) joins its trace; the verification re-reads.
func (c *Client) RecordAttempt(ctx context.Context, actionID, key string, claim commitlayer.Claim, trace json.RawMessage, opts ...RecordOptions) (Accepted, error) {
	r := c.post("/v1/actions/"+url.PathEscape(actionID)+"/attempts", AttemptInput{Claim: claim, Trace: trace}, true)
	r.idempotencyKey = key
	return c.accepted(ctx, r, opts)
}

func (c *Client) accepted(ctx context.Context, r request, opts []RecordOptions) (Accepted, error) {
	if len(opts) > 0 && opts[0].Wait != "" {
		if w := opts[0].Wait; w != Provisional && w != Final {
			return Accepted{}, fmt.Errorf("%s %s: wait stage %q is neither provisional nor final", r.method, r.path, w)
		}
		r.query = waitQuery(opts[0].Wait, opts[0].WaitTimeout)
	}
	var out Accepted
	res, err := c.do(ctx, r, &out)
	if err != nil {
		return Accepted{}, err
	}
	out.Replayed = res.header.Get("Idempotent-Replayed") == "true"
	return out, nil
}

func actionInput(a commitlayer.Action) ActionInput {
	in := ActionInput{
		ID: a.ID, Contract: a.Contract, ContractVersion: a.ContractVersion, Agent: a.Agent,
		Subject: string(a.Subject), Params: a.Params, Trace: a.Trace,
	}
	if !a.RequestedAt.IsZero() {
		t := a.RequestedAt.UTC()
		in.RequestedAt = &t
	}
	if a.Claim != (commitlayer.Claim{}) {
		in.Claim = &a.Claim
	}
	return in
}

// GetAction returns the action, its current verdict and its history.
func (c *Client) GetAction(ctx context.Context, id string) (ActionDetail, error) {
	return c.getAction(ctx, id, nil)
}

func (c *Client) getAction(ctx context.Context, id string, q url.Values) (ActionDetail, error) {
	var out ActionDetail
	_, err := c.do(ctx, get("/v1/actions/"+url.PathEscape(id), q), &out)
	return out, err
}

// Recheck forces a re-verification now and returns the new verdict (code
// verification_ended once the watch is over).
func (c *Client) Recheck(ctx context.Context, id string) (commitlayer.Verdict, error) {
	var out RecheckResult
	_, err := c.do(ctx, c.post("/v1/actions/"+url.PathEscape(id)+"/recheck", nil, true), &out)
	return out.Verdict, err
}

// ListOrphans lists a contract's effects since the given time (zero: the
// server's default) that no recorded action accounts for.
func (c *Client) ListOrphans(ctx context.Context, contractID string, since time.Time) (OrphanList, error) {
	q := values("since", rfc3339(since))
	q.Set("contract_id", contractID)
	var out OrphanList
	_, err := c.do(ctx, get("/v1/actions/orphans", q), &out)
	return out, err
}

func get(path string, q url.Values) request {
	return request{method: http.MethodGet, path: path, query: q, safe: true}
}

// post builds a POST of body (JSON, or []byte as is). A safe one gets a
// fresh idempotency key; an unsafe one none, as net/http would take the
// header as leave to resend it on a broken keep-alive connection.
func (c *Client) post(path string, body any, safe bool) request {
	r := request{method: http.MethodPost, path: path, body: body, contentType: "application/json", safe: safe}
	if safe {
		r.idempotencyKey = c.newKey()
	}
	return r
}

// values is a query of the pairs (key, value, …) with a value.
func values(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}

// rfc3339 is t in UTC as RFC 3339, "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
