package mcpgw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What comes from the upstream is read through a guard before the SDK's
// client sees it, so that one bad answer fails only the call it belongs
// to, never the upstream session every agent shares, and nothing the
// upstream sends makes the gateway hold more than MaxMessage bytes for it:
//   - an answer that is not a JSON-RPC message, answers another id, or is
//     larger than MaxMessage (a JSON body, an SSE event, a stdio line) is
//     replaced by a JSON-RPC error for the request it answers, read no
//     further, and the session goes on;
//   - the raw result of each forwarded request is kept for its handler
//     (a slot in its context), which answers the agent with the upstream's
//     JSON as sent, not as the SDK would encode it again;
//   - progress notifications are relayed to the asking agent as they are
//     read (the SDK's client queues notifications behind responses).
// Over HTTP, credentials go only to the upstream's origin and a redirect to
// another origin is refused.

// slot receives the upstream's raw result for one forwarded request.
type slot struct {
	mu  sync.Mutex
	raw json.RawMessage
}

type slotKey struct{}

func withSlot(ctx context.Context) (context.Context, *slot) {
	s := &slot{}
	return context.WithValue(ctx, slotKey{}, s), s
}

func (s *slot) set(raw json.RawMessage) {
	s.mu.Lock()
	s.raw = raw
	s.mu.Unlock()
}

func (s *slot) get() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw
}

// errorFor is a JSON-RPC error answer to id.
func errorFor(id jsonrpc.ID, format string, args ...any) []byte {
	b, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id,
		Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(format, args...)}})
	return b
}

// check reads one message from the upstream as the answer to call (nil:
// none expected): the message to pass on, and whether it ends the call's
// answer. A message that is not JSON-RPC, or a response to another id, is
// replaced by an error for call (or dropped, nil, when there is none).
func (g *Gateway) check(ctx context.Context, data []byte, call *jsonrpc.Request) ([]byte, bool) {
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		if call == nil {
			g.log.Warn("mcp gateway: dropped an upstream message that is not JSON-RPC", "error", err)
			return nil, false
		}
		return errorFor(call.ID, "the upstream MCP server answered %s with a message that is not JSON-RPC", call.Method), true
	}
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if !m.IsCall() && m.Method == "notifications/progress" && g.relayProgress(ctx, m.Params) {
			return nil, false
		}
	case *jsonrpc.Response:
		if call != nil && m.ID != call.ID {
			return errorFor(call.ID, "the upstream MCP server answered %s with the id of another request", call.Method), true
		}
		if s, ok := ctx.Value(slotKey{}).(*slot); ok && call != nil && m.Error == nil {
			s.set(m.Result)
		}
		return data, call != nil
	}
	return data, false
}

// tooLarge is the error answer for a message over the bound.
func (g *Gateway) tooLarge(call *jsonrpc.Request) []byte {
	return errorFor(call.ID, "the upstream MCP server's answer to %s is larger than %d bytes (-max-message); refused",
		call.Method, g.cfg.MaxMessage)
}

// upstreamTransport is the HTTP upstream's RoundTripper: its headers and
// the agent's Authorization (ForwardAuth) go only to the upstream's origin,
// and every answer is read through the guard.
type upstreamTransport struct {
	g      *Gateway
	base   http.RoundTripper
	origin string
	header http.Header
}

// authKey carries an agent's Authorization header to the upstream request
// of its call.
type authKey struct{}

func originOf(u *url.URL) string { return strings.ToLower(u.Scheme + "://" + u.Host) }

func (t *upstreamTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if originOf(r.URL) == t.origin {
		r = r.Clone(r.Context())
		for k, vs := range t.header {
			r.Header[k] = append([]string(nil), vs...)
		}
		if auth, _ := r.Context().Value(authKey{}).(string); auth != "" {
			r.Header.Set("Authorization", auth)
		}
	}
	var call *jsonrpc.Request
	if r.Method == http.MethodPost && r.GetBody != nil {
		if body, err := r.GetBody(); err == nil {
			b, _ := io.ReadAll(io.LimitReader(body, 16<<20))
			if m, err := jsonrpc.DecodeMessage(b); err == nil {
				if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
					call = req
				}
			}
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	if why := redirected(r, resp, t.origin); why != "" {
		_ = resp.Body.Close()
		if call == nil {
			return nil, errors.New("the upstream MCP server " + why)
		}
		b := errorFor(call.ID, "the upstream MCP server %s", why)
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: r}, nil
	}
	ctx, g := r.Context(), t.g
	switch ct := resp.Header.Get("Content-Type"); {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, 64<<10), resp.Body}
	case strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &sseGuard{g: g, ctx: ctx, call: call, in: bufio.NewReaderSize(resp.Body, 64<<10), body: resp.Body}
	case call != nil:
		b, err := io.ReadAll(io.LimitReader(resp.Body, int64(g.cfg.MaxMessage)+1))
		_ = resp.Body.Close()
		switch {
		case err != nil:
			b = errorFor(call.ID, "reading the upstream MCP server's answer to %s: %v", call.Method, err)
		case len(b) > g.cfg.MaxMessage:
			b = g.tooLarge(call)
		default:
			b, _ = g.check(ctx, b, call)
		}
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		resp.Header.Set("Content-Type", "application/json")
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}

// redirected says why a redirect is not followed: to another origin
// (credentials stay with theirs), or after three. http.Client follows the
// others (checkRedirect stands behind this).
func redirected(r *http.Request, resp *http.Response, origin string) string {
	loc, err := resp.Location()
	if err != nil || resp.StatusCode < 300 || resp.StatusCode > 399 {
		return ""
	}
	hops := 1
	for x := r.Response; x != nil && x.Request != nil; x = x.Request.Response {
		hops++
	}
	switch {
	case originOf(loc) != origin:
		return fmt.Sprintf("redirected to another origin (%s); not followed", originOf(loc))
	case hops > 3:
		return "redirected more than 3 times; not followed"
	}
	return ""
}

func checkRedirect(req *http.Request, via []*http.Request) error {
	if originOf(req.URL) != originOf(via[0].URL) || len(via) > 3 {
		return errors.New("redirect not followed")
	}
	return nil
}

// sseGuard passes an SSE body on event by event, each checked whole (at
// most MaxMessage bytes of it kept). For a call's stream, a bad or
// oversized event is replaced by an error answer and the stream ends
// there; on the standalone stream it is dropped.
type sseGuard struct {
	g     *Gateway
	ctx   context.Context
	call  *jsonrpc.Request
	in    *bufio.Reader
	body  io.Closer
	line  bytes.Buffer
	event bytes.Buffer // the event's lines as read
	data  bytes.Buffer
	out   bytes.Buffer
	over  bool
	done  bool
}

func (s *sseGuard) Close() error { return s.body.Close() }

func (s *sseGuard) Read(p []byte) (int, error) {
	for s.out.Len() == 0 {
		if s.done {
			return 0, io.EOF
		}
		if err := s.step(); err != nil {
			if s.out.Len() > 0 {
				s.done = true
				break
			}
			return 0, err
		}
	}
	return s.out.Read(p)
}

// step reads one line and, at the end of an event, decides what of it
// goes on.
func (s *sseGuard) step() error {
	var err error
	s.line.Reset()
	for {
		var chunk []byte
		chunk, err = s.in.ReadSlice('\n')
		if s.event.Len()+s.line.Len()+len(chunk) > s.g.cfg.MaxMessage {
			s.over = true
		} else if !s.over {
			s.line.Write(chunk)
		}
		if !errors.Is(err, bufio.ErrBufferFull) || s.over && s.call != nil {
			break
		}
	}
	if s.over && s.call != nil {
		s.emit(s.g.tooLarge(s.call))
		s.done = true
		return nil
	}
	if s.line.Len() == 0 && err != nil {
		return err
	}
	line := s.line.Bytes()
	text := bytes.TrimRight(line, "\r\n")
	if !s.over {
		s.event.Write(line)
		if f, ok := bytes.CutPrefix(text, []byte("data:")); ok {
			if s.data.Len() > 0 {
				s.data.WriteByte('\n')
			}
			s.data.Write(bytes.TrimPrefix(f, []byte(" ")))
		}
	}
	if len(text) > 0 || !bytes.HasSuffix(line, []byte("\n")) {
		return err
	}
	// The event ends.
	switch {
	case s.over:
		s.g.log.Warn("mcp gateway: dropped an upstream event larger than the bound", "max_message", s.g.cfg.MaxMessage)
	case s.data.Len() == 0:
		s.out.Write(s.event.Bytes())
	default:
		msg, end := s.g.check(s.ctx, s.data.Bytes(), s.call)
		switch {
		case msg == nil:
		case bytes.Equal(msg, s.data.Bytes()):
			s.out.Write(s.event.Bytes())
		default:
			s.emit(msg)
		}
		s.done = end
	}
	s.event.Reset()
	s.data.Reset()
	s.over = false
	return err
}

func (s *sseGuard) emit(msg []byte) {
	s.out.WriteString("event: message\ndata: ")
	s.out.Write(msg)
	s.out.WriteString("\n\n")
}

// commandTransport runs the upstream command and speaks MCP over its
// stdio, reading its stdout through lineGuard. Closing it closes the
// command's stdin, then ends the command if it does not exit (as the
// SDK's CommandTransport).
type commandTransport struct {
	g    *Gateway
	argv []string
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	cmd := exec.Command(t.argv[0], t.argv[1:]...)
	cmd.Env = upstreamEnv(os.Environ())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lg := &lineGuard{g: t.g, in: bufio.NewReaderSize(stdout, 64<<10)}
	c, err := (&mcp.IOTransport{Reader: io.NopCloser(lg), Writer: &process{cmd: cmd, stdin: stdin},
		MaxLineLength: t.g.cfg.MaxMessage + 1024}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &captureConn{Connection: c, g: t.g, calls: map[jsonrpc.ID]*slot{}}, nil
}

// process is the command's stdin; closing it ends the command.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *process) Close() error {
	_ = p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	for _, sig := range []os.Signal{nil, syscall.SIGTERM, os.Kill} {
		if sig != nil {
			_ = p.cmd.Process.Signal(sig)
		}
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
		}
	}
	return errors.New("the upstream command did not exit")
}

// lineGuard passes the command's stdout on line by line: a line that is
// not a JSON-RPC message or is longer than MaxMessage is not passed on (the
// SDK would end the session); when the id of the request it answers can be
// read from its start, an error answer for that id takes its place.
type lineGuard struct {
	g   *Gateway
	in  *bufio.Reader
	out bytes.Buffer
}

func (l *lineGuard) Read(p []byte) (int, error) {
	for l.out.Len() == 0 {
		var line []byte
		over := false
		for {
			chunk, err := l.in.ReadSlice('\n')
			if !over {
				line = append(line, chunk...)
				over = len(line) > l.g.cfg.MaxMessage
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil && len(line) == 0 {
				return 0, err
			}
			break
		}
		switch _, err := jsonrpc.DecodeMessage(bytes.TrimSpace(line)); {
		case len(bytes.TrimSpace(line)) == 0:
		case over || err != nil:
			why := "a message that is not JSON-RPC"
			if over {
				why = fmt.Sprintf("a message larger than %d bytes (-max-message); refused", l.g.cfg.MaxMessage)
			}
			id, ok := leadingID(line)
			if !ok {
				l.g.log.Warn("mcp gateway: dropped an upstream line: " + why)
				continue
			}
			l.out.Write(errorFor(id, "the upstream MCP server answered with %s", why))
			l.out.WriteByte('\n')
		default:
			l.out.Write(line)
		}
	}
	return l.out.Read(p)
}

// leadingID reads the "id" of a JSON-RPC response from the start of line
// (SDKs write it before the result).
func leadingID(line []byte) (jsonrpc.ID, bool) {
	dec := json.NewDecoder(bytes.NewReader(line[:min(len(line), 4096)]))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return jsonrpc.ID{}, false
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return jsonrpc.ID{}, false
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return jsonrpc.ID{}, false
		}
		if k != "id" {
			continue
		}
		if n, ok := v.(json.Number); ok {
			i, err := n.Int64()
			if err != nil {
				return jsonrpc.ID{}, false
			}
			v = i
		}
		id, err := jsonrpc.MakeID(v)
		return id, err == nil && id.IsValid()
	}
	return jsonrpc.ID{}, false
}

// captureConn keeps the raw result of each call the gateway forwards over
// stdio for its handler, and relays progress as it is read.
type captureConn struct {
	mcp.Connection
	g     *Gateway
	mu    sync.Mutex
	calls map[jsonrpc.ID]*slot
}

func (c *captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if s, ok := ctx.Value(slotKey{}).(*slot); ok {
			c.mu.Lock()
			c.calls[req.ID] = s
			c.mu.Unlock()
			go func() { // forgotten once the call ends
				<-ctx.Done()
				c.mu.Lock()
				delete(c.calls, req.ID)
				c.mu.Unlock()
			}()
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		switch m := msg.(type) {
		case *jsonrpc.Request:
			if !m.IsCall() && m.Method == "notifications/progress" && c.g.relayProgress(ctx, m.Params) {
				continue
			}
		case *jsonrpc.Response:
			c.mu.Lock()
			s, ok := c.calls[m.ID]
			c.mu.Unlock()
			if ok && m.Error == nil {
				s.set(m.Result)
			}
		}
		return msg, nil
	}
}
