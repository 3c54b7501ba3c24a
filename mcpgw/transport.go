package mcpgw

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// redactURL drops a URL's user info and query (they may hold secrets) for
// messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(an unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// maxMCPBody bounds a POST body the HTTP handler reads to find a call's id.
const maxMCPBody = 8 << 20

// HTTPHandler serves MCP over Streamable HTTP (mount it at /mcp). It hands
// each tools/call's JSON-RPC id to the tool handler in HeaderRequestID.
func (g *Gateway) HTTPHandler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server },
		&mcp.StreamableHTTPOptions{Logger: g.log, SessionTimeout: g.cfg.SessionIdleTimeout})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(HeaderRequestID)
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxMCPBody+1))
			_ = r.Body.Close()
			if err != nil {
				http.Error(w, "cannot read the request body", http.StatusBadRequest)
				return
			}
			if len(body) > maxMCPBody {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			code, msg, id, method := checkMessage(body)
			switch {
			case code != 0:
				// A body that is no JSON-RPC message (or batch of them)
				// is answered with a JSON-RPC error, not 202.
				writeRPCError(w, id, code, msg)
				return
			case r.Header.Get("Mcp-Session-Id") == "" && method != "" && method != "initialize" && method != "server/discover":
				// MCP (2025-06-18, Streamable HTTP, "Session
				// Management"): a request without the session the
				// gateway gave is answered 400. The SDK would open a
				// session for it and answer a JSON-RPC error of code 0.
				// server/discover is the SDK's, so that clients of newer
				// protocols fall back to initialize.
				writeRPCError(w, id, -32600,
					fmt.Sprintf("%s without an Mcp-Session-Id header: send initialize first and the Mcp-Session-Id it answers with every request", method))
				return
			case method == "tools/call":
				if id := canonicalRawID(id); id != "" {
					r.Header.Set(HeaderRequestID, id)
				}
			case bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")):
				body = tagBatchCalls(body)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		h.ServeHTTP(w, r)
	})
}

// writeRPCError answers an HTTP request 400 with a JSON-RPC error.
func writeRPCError(w http.ResponseWriter, id json.RawMessage, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(rpcError(id, code, msg))
}

// rpcError is a JSON-RPC error answer to an agent's id (null when none
// could be read).
func rpcError(id json.RawMessage, code int, msg string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg}})
	return b
}

// metaRequestID carries, in a batch (2025-03-26 and earlier, where one
// HTTP request holds several calls and their handlers share its header),
// each tools/call's canonical JSON-RPC id in its params' _meta. The
// gateway writes it over whatever the agent sent, reads it only when no
// header id reached the handler, and never forwards it.
const metaRequestID = "io.commitlayer/jsonrpc-id"

// tagBatchCalls writes each tools/call's id into its _meta; a body it
// cannot read is returned as it was (the SDK answers it).
func tagBatchCalls(body []byte) []byte {
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(body, &msgs) != nil {
		return body
	}
	for _, m := range msgs {
		var method string
		if m == nil || json.Unmarshal(m["method"], &method) != nil || method != "tools/call" {
			continue
		}
		var params map[string]json.RawMessage
		id := canonicalRawID(m["id"])
		if id == "" || json.Unmarshal(m["params"], &params) != nil || params == nil {
			continue
		}
		var meta map[string]json.RawMessage
		_ = json.Unmarshal(params["_meta"], &meta)
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		meta[metaRequestID], _ = json.Marshal(id)
		params["_meta"], _ = json.Marshal(meta)
		m["params"], _ = json.Marshal(params)
	}
	out, err := json.Marshal(msgs)
	if err != nil {
		return body
	}
	return out
}

// canonicalRawID is canonicalID of a raw id ("" when it is none).
func canonicalRawID(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return ""
	}
	return canonicalID(v)
}

// canonicalID writes a JSON-RPC id so the number 5 and the string "5"
// differ: 5 and "5".
func canonicalID(v any) string {
	switch x := v.(type) {
	case string:
		b, _ := json.Marshal(x)
		return string(b)
	case json.Number:
		// The SDK reads a numeric id as a float64 and answers with its
		// integer part (1.0, 1e0 and 1 are one id to it); so does the key.
		if i, err := x.Int64(); err == nil {
			return strconv.FormatInt(i, 10)
		}
		if f, err := x.Float64(); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return strconv.FormatInt(int64(f), 10)
		}
		return x.String()
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// idTransport hands each tools/call's JSON-RPC id to the tool handler, as
// the HTTP handler does with a header.
type idTransport struct{ inner mcp.Transport }

func (t *idTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &idConn{Connection: c}, nil
}

type idConn struct{ mcp.Connection }

func (c *idConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/call" && req.ID.IsValid() && req.Extra == nil {
		if id := canonicalID(req.ID.Raw()); id != "" && !strings.ContainsAny(id, "\r\n") {
			req.Extra = &mcp.RequestExtra{Header: http.Header{HeaderRequestID: {id}}}
		}
	}
	return msg, nil
}
