// Package wirecheck checks, in tests, that what the fake Stripe was sent is
// what Stripe accepts: one request of each shape replayed to stripe-mock
// (internal/testenv starts it).
package wirecheck

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/commitlayer/commitlayer/sandbox/stripefake"
)

// Shape is what identifies the form of a request regardless of its values:
// method, path with ids replaced by {id}, and sorted parameter names.
func Shape(r stripefake.Request) string {
	segs := strings.Split(r.Path, "/")
	for i, s := range segs {
		if strings.Contains(s, "_") && i >= 3 {
			segs[i] = "{id}"
		}
	}
	names := make([]string, 0, len(r.Form))
	for k := range r.Form {
		names = append(names, k)
	}
	slices.Sort(names)
	key := ""
	if r.IdempotencyKey != "" {
		key = " +Idempotency-Key"
	}
	return r.Method + " " + strings.Join(segs, "/") + " " + strings.Join(names, "&") + key
}

// replay builds the same request against another Stripe-compatible server
// (stripe-mock), authenticated with key.
func replay(ctx context.Context, r stripefake.Request, base, key string) (*http.Request, error) {
	u := strings.TrimRight(base, "/") + r.Path
	var body io.Reader
	if r.Method == http.MethodGet {
		u += "?" + r.Form.Encode()
	} else {
		body = strings.NewReader(r.Form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, body)
	if err != nil {
		return nil, fmt.Errorf("replay %s %s: %w", r.Method, r.Path, err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if r.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", r.IdempotencyKey)
	}
	return req, nil
}

// Shapes sends one request of each distinct shape in reqs to base (a
// stripe-mock) and returns the shapes sent, or an error naming the first
// shape not answered with a 2xx and the answer.
func Shapes(ctx context.Context, reqs []stripefake.Request, base string) ([]string, error) {
	var shapes []string
	seen := map[string]bool{}
	for _, q := range reqs {
		shape := Shape(q)
		if seen[shape] {
			continue
		}
		seen[shape] = true
		req, err := replay(ctx, q, base, "sk_test_stripemock")
		if err != nil {
			return shapes, err
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return shapes, fmt.Errorf("send %s: %w", shape, err)
		}
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		res.Body.Close()
		if res.StatusCode < 200 || res.StatusCode > 299 {
			return shapes, fmt.Errorf("refused %s: %d %s", shape, res.StatusCode, body)
		}
		shapes = append(shapes, shape)
	}
	return shapes, nil
}
