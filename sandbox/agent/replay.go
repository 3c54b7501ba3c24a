package agent

import (
	"context"
	"fmt"
	"github.com/commitlayer/commitlayer/llm"
	"strings"
)

// Resend makes one recorded attempt again, byte for byte: its method, path,
// body and idempotency key, not a request rebuilt from its arguments (a
// number decoded from a recording must not change the body sent). The
// answer is recorded in the returned Call as Do records it; the error is
// only for an attempt that names no request (no method or path).
func (c *Client) Resend(ctx context.Context, rec llm.Attempt) (llm.Attempt, error) {
	if rec.Method == "" || !strings.HasPrefix(rec.Path, "/") {
		return llm.Attempt{}, fmt.Errorf("resend %s: the recording has no request (method %q, path %q)", rec.Tool, rec.Method, rec.Path)
	}
	call := rec
	call.Status, call.Response, call.Error = 0, "", ""
	if err := c.send(ctx, &call); err != nil {
		return llm.Attempt{}, fmt.Errorf("resend %s: %w", rec.Tool, err)
	}
	return call, nil
}
