package benchapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/sandbox/bench"
)

// Client calls the benchmark's admin routes on an API that mounts them (a
// process with the benchmark role), with the admin key. It shares the
// routes' wire types (bench.Request, RunView) and answers their errors as
// the product's client does (*client.APIError: client.IsNotFound and
// client.IsCode work on them). Nothing is retried: a start is not
// idempotent, and the other calls are an operator's.
type Client struct {
	base, key string
	http      *http.Client
}

// PurgeView is the answer of DELETE /v1/admin/benchmark/{id}/tenants.
type PurgeView struct {
	ID            string `json:"id"`
	PurgedTenants int    `json:"purged_tenants"`
}

// NewClient returns a client of the API at baseURL; hc nil is a client
// with a 30 s timeout.
func NewClient(baseURL, adminKey string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("benchmark client: %q is not an http or https URL", baseURL)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), key: adminKey, http: hc}, nil
}

// Start starts a run (202): the run as stored, status running.
func (c *Client) Start(ctx context.Context, req bench.Request) (RunView, error) {
	var out RunView
	return out, c.do(ctx, http.MethodPost, "/v1/admin/benchmark", req, &out)
}

// List lists every run, newest first, without their results.
func (c *Client) List(ctx context.Context) ([]RunView, error) {
	var out struct {
		Runs []RunView `json:"runs"`
	}
	return out.Runs, c.do(ctx, http.MethodGet, "/v1/admin/benchmark", nil, &out)
}

// Get returns one run with its results, markdown and log tail.
func (c *Client) Get(ctx context.Context, id string) (RunView, error) {
	var out RunView
	return out, c.do(ctx, http.MethodGet, "/v1/admin/benchmark/"+url.PathEscape(id), nil, &out)
}

// PurgeTenants deletes the tenants a finished run created.
func (c *Client) PurgeTenants(ctx context.Context, id string) (PurgeView, error) {
	var out PurgeView
	return out, c.do(ctx, http.MethodDelete, "/v1/admin/benchmark/"+url.PathEscape(id)+"/tenants", nil, &out)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return &client.APIError{StatusCode: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message,
			RequestID: resp.Header.Get("X-Request-Id")}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}
