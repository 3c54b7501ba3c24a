package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Resend makes one recorded attempt again, byte for byte: its method, path,
// body and idempotency key, not a request rebuilt from its arguments (a
// number decoded from a recording must not change the body sent). The
// answer is recorded in the returned Call as Do records it; the error is
// only for an attempt that names no request (no method or path).
func (c *Client) Resend(ctx context.Context, rec Call) (Call, error) {
	if rec.Method == "" || !strings.HasPrefix(rec.Path, "/") {
		return Call{}, fmt.Errorf("resend %s: the recording has no request (method %q, path %q)", rec.Tool, rec.Method, rec.Path)
	}
	call := rec
	call.Status, call.Response, call.Error = 0, "", ""
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if rec.Method != http.MethodGet {
		rd = bytes.NewReader([]byte(rec.Body))
	}
	req, err := http.NewRequestWithContext(ctx, rec.Method, strings.TrimRight(c.BaseURL, "/")+rec.Path, rd)
	if err != nil {
		return Call{}, fmt.Errorf("resend %s: %w", rec.Tool, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if rec.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", rec.IdempotencyKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: timeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		call.Error = describe(err)
		return call, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	call.Status = resp.StatusCode
	call.Response = string(b)
	if err != nil {
		call.Error = "read response: " + describe(err)
	}
	return call, nil
}
