package mcpgw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves MCP over the process's stdin and stdout until ctx ends
// or the agent closes stdin.
func (g *Gateway) ServeStdio(ctx context.Context) error {
	return g.ServeIO(ctx, os.Stdin, nopCloser{os.Stdout}) // stdout stays open for the process, as the SDK's stdio leaves it
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// ServeIO serves MCP over r and w (newline-delimited JSON-RPC), as stdio.
// A line that is not a JSON-RPC message is answered with a JSON-RPC error
// (-32700 not JSON, -32600 not a request, notification or response) and
// the session goes on: the SDK's reader stops for good at the first
// undecodable message, which would end the agent's session (and the
// gateway run as its command).
func (g *Gateway) ServeIO(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	out := &lockedWriter{w: w}
	pass := func(line []byte, over bool) []byte {
		code, msg, id, _ := checkMessage(line)
		switch {
		case over:
			code, msg, id = -32600, "Invalid Request: message longer than 16 MiB", nil
		case len(bytes.TrimSpace(line)) == 0:
			return nil
		case code == 0:
			return append(line, '\n')
		}
		_, _ = out.Write(append(rpcError(id, code, msg), '\n'))
		return nil
	}
	in := &lineFilter{in: bufio.NewReaderSize(r, 64<<10), max: mcp.DefaultMaxLineLength, pass: pass}
	return g.server.Run(ctx, &idTransport{inner: &mcp.IOTransport{Reader: struct {
		io.Reader
		io.Closer
	}{in, r}, Writer: out}})
}

// lockedWriter serialises the SDK's writes (one Write per message) and
// the filter's error answers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// checkMessage tells a line that is not a JSON-RPC 2.0 message (or batch
// of them): the error code and message to answer, and the id to answer
// it with when one can be read. For one message it also gives its method
// and id, read in the same pass.
func checkMessage(line []byte) (code int, msg string, id json.RawMessage, method string) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil || len(batch) == 0 {
			if _, syntax := err.(*json.SyntaxError); syntax {
				return -32700, "Parse error: the message is not JSON", nil, ""
			}
			return -32600, "Invalid Request: an empty batch or not an array of messages", nil, ""
		}
		for _, m := range batch {
			if code, msg, _, _ := checkMessage(m); code != 0 {
				return code, msg + " (in a batch)", nil, ""
			}
		}
		return 0, "", nil, ""
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  *string         `json:"method"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(trimmed, &m); err != nil {
		if _, syntax := err.(*json.SyntaxError); syntax || len(trimmed) == 0 {
			return -32700, "Parse error: the message is not JSON", nil, ""
		}
		return -32600, "Invalid Request: a message is a JSON object", nil, ""
	}
	id = bytes.TrimSpace(m.ID)
	if len(id) > 0 && id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9') {
		return -32600, "Invalid Request: id must be a string or a number", nil, ""
	}
	switch {
	case m.JSONRPC != "2.0":
		return -32600, `Invalid Request: "jsonrpc" must be "2.0"`, id, ""
	case m.Method != nil && *m.Method == "":
		return -32600, "Invalid Request: empty method", id, ""
	case m.Method == nil && (len(id) == 0 || (m.Result == nil && m.Error == nil)):
		return -32600, "Invalid Request: neither a request, a notification nor a response", id, ""
	case m.Method != nil:
		method = *m.Method
	}
	return 0, "", id, method
}
