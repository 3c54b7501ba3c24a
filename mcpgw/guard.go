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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What comes from the upstream is read here before the SDK's client sees
// it, so that one bad answer (not JSON-RPC, another id, over MaxMessage)
// fails only the call it answers, never the session every agent shares,
// and the gateway never holds more than MaxMessage bytes of it. The raw
// result of each forwarded request goes to a slot in its context, so the
// agent gets the upstream's JSON as sent; progress is relayed as it is
// read (the SDK's client queues notifications behind responses). Over
// HTTP, credentials go only to the upstream's origin.

// slot receives the upstream's raw result for one forwarded request.
type slot = atomic.Pointer[json.RawMessage]

type slotKey struct{}

func withSlot(ctx context.Context) (context.Context, *slot) {
	s := &slot{}
	return context.WithValue(ctx, slotKey{}, s), s
}

// errorFor is a JSON-RPC error answer to id.
func errorFor(id jsonrpc.ID, format string, args ...any) []byte {
	b, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id,
		Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(format, args...)}})
	return b
}

// check reads one message from the upstream: the message to pass on (nil:
// none), and whether it answers call (nil: none expected). A message that
// is not JSON-RPC, or answers call with another id, is replaced by an
// error for call (dropped when there is none); a response's result goes to
// the slot slotFor gives; a progress notification to its agent.
func (g *Gateway) check(data []byte, call *jsonrpc.Request, slotFor func(jsonrpc.ID) *slot) ([]byte, bool) {
	switch m := decoded(data).(type) {
	case nil:
		if call != nil {
			return errorFor(call.ID, "the upstream MCP server answered %s with a message that is not JSON-RPC", call.Method), true
		}
		if id, ok := leadingID(data); ok {
			return errorFor(id, "the upstream MCP server answered with a message that is not JSON-RPC"), false
		}
		g.log.Warn("mcp gateway: dropped an upstream message that is not JSON-RPC")
		return nil, false
	case *jsonrpc.Request:
		if !m.IsCall() && m.Method == "notifications/progress" && g.relayProgress(m.Params) {
			return nil, false
		}
	case *jsonrpc.Response:
		if call != nil && m.ID != call.ID {
			return errorFor(call.ID, "the upstream MCP server answered %s with the id of another request", call.Method), true
		}
		if s := slotFor(m.ID); s != nil && m.Error == nil {
			s.Store(&m.Result)
		}
		return data, call != nil
	}
	return data, false
}

// decoded is data as a JSON-RPC message, nil when it is none.
func decoded(data []byte) jsonrpc.Message {
	m, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil
	}
	return m
}

// tooLarge is the error answer to id for a message over the bound.
func (g *Gateway) tooLarge(id jsonrpc.ID) []byte {
	return errorFor(id, "the upstream MCP server's answer is larger than %d bytes (-max-message); refused", g.cfg.MaxMessage)
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
			if req, ok := decoded(b).(*jsonrpc.Request); ok && req.IsCall() {
				call = req
			}
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	ctxSlot, _ := r.Context().Value(slotKey{}).(*slot)
	slotFor := func(jsonrpc.ID) *slot { return ctxSlot }
	reply := func(b []byte) (*http.Response, error) {
		_ = resp.Body.Close()
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: r}, nil
	}
	why := redirected(r, resp, t.origin)
	switch ct := resp.Header.Get("Content-Type"); {
	case why != "" && call == nil:
		_ = resp.Body.Close()
		return nil, errors.New("the upstream MCP server " + why)
	case why != "":
		return reply(errorFor(call.ID, "the upstream MCP server %s", why))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, 64<<10), resp.Body}
	case strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &sseGuard{g: t.g, call: call, slotFor: slotFor, in: bufio.NewReaderSize(resp.Body, 64<<10), body: resp.Body}
	case call != nil:
		b, err := io.ReadAll(io.LimitReader(resp.Body, int64(t.g.cfg.MaxMessage)+1))
		switch {
		case err != nil:
			b = errorFor(call.ID, "reading the upstream MCP server's answer to %s: %v", call.Method, err)
		case len(b) > t.g.cfg.MaxMessage:
			b = t.g.tooLarge(call.ID)
		default:
			b, _ = t.g.check(b, call, slotFor)
		}
		return reply(b)
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

// readLine reads a line without its newline; over says it was longer than
// max, and only its first 4 KiB are kept (where a JSON-RPC id is).
func readLine(r *bufio.Reader, max int) (line []byte, over bool, err error) {
	for {
		var chunk []byte
		chunk, err = r.ReadSlice('\n')
		if !over {
			line = append(line, chunk...)
			if len(line) > max+1 {
				over, line = true, line[:min(len(line), 4096)]
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return bytes.TrimSuffix(line, []byte("\n")), over, err
		}
	}
}

// sseGuard passes an SSE body on event by event, each checked whole (at
// most MaxMessage bytes of it kept). For a call's stream, a bad or
// oversized event is replaced by an error answer and the stream ends
// there; on the standalone stream it is dropped.
type sseGuard struct {
	g       *Gateway
	call    *jsonrpc.Request
	slotFor func(jsonrpc.ID) *slot
	in      *bufio.Reader
	body    io.Closer
	event   bytes.Buffer // the event's lines as read
	data    bytes.Buffer
	out     bytes.Buffer
	over    bool
	done    bool
}

func (s *sseGuard) Close() error { return s.body.Close() }

func (s *sseGuard) Read(p []byte) (int, error) {
	for s.out.Len() == 0 && !s.done {
		line, over, err := readLine(s.in, s.g.cfg.MaxMessage-s.event.Len())
		s.over = s.over || over
		switch {
		case s.over && s.call != nil:
			s.emit(s.g.tooLarge(s.call.ID))
			s.done = true
		case len(line) == 0 && err != nil:
			return 0, err
		case len(bytes.TrimSuffix(line, []byte("\r"))) > 0 || err != nil: // a field of the event
			if f, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\r")), []byte("data:")); ok && !s.over {
				if s.data.Len() > 0 {
					s.data.WriteByte('\n')
				}
				s.data.Write(bytes.TrimPrefix(f, []byte(" ")))
			}
			if !s.over {
				s.event.Write(append(line, '\n'))
			}
		case s.over: // the event ends
			s.g.log.Warn("mcp gateway: dropped an upstream event larger than the bound", "max_message", s.g.cfg.MaxMessage)
		case s.data.Len() == 0:
			s.out.Write(append(s.event.Bytes(), '\n'))
		default:
			msg, end := s.g.check(s.data.Bytes(), s.call, s.slotFor)
			if bytes.Equal(msg, s.data.Bytes()) {
				s.out.Write(append(s.event.Bytes(), '\n'))
			} else if msg != nil {
				s.emit(msg)
			}
			s.done = end
		}
		if len(line) == 0 {
			s.event.Reset()
			s.data.Reset()
			s.over = false
		}
	}
	if s.out.Len() == 0 {
		return 0, io.EOF
	}
	return s.out.Read(p)
}

func (s *sseGuard) emit(msg []byte) {
	s.out.WriteString("event: message\ndata: ")
	s.out.Write(msg)
	s.out.WriteString("\n\n")
}

// commandTransport speaks MCP over the upstream command's stdio, reading
// its stdout through pass; Close kills a command not gone 5 s after stdin.
type commandTransport struct {
	g     *Gateway
	argv  []string
	slots sync.Map // jsonrpc.ID → *slot of a call in flight
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	cmd := exec.Command(t.argv[0], t.argv[1:]...)
	cmd.Stderr = os.Stderr
	// The child gets the gateway's environment without its CommitLayer key.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envKey+"=") })
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
	in := &lineFilter{in: bufio.NewReaderSize(stdout, 64<<10), max: t.g.cfg.MaxMessage, pass: t.pass}
	c, err := (&mcp.IOTransport{Reader: io.NopCloser(in), Writer: &process{cmd: cmd, stdin: stdin},
		MaxLineLength: t.g.cfg.MaxMessage + 1024}).Connect(ctx)
	return &slotConn{Connection: c, t: t}, err
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
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		return <-done
	}
}

// slotConn notes the slot of each call the gateway sends, by its id.
type slotConn struct {
	mcp.Connection
	t *commandTransport
}

func (c *slotConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if s, ok := ctx.Value(slotKey{}).(*slot); ok {
			c.t.slots.Store(req.ID, s)
			context.AfterFunc(ctx, func() { c.t.slots.Delete(req.ID) })
		}
	}
	return c.Connection.Write(ctx, msg)
}

// pass is what of a line of the command's stdout goes on to the SDK: a
// line that is not a JSON-RPC message or is longer than MaxMessage is not
// passed on (the SDK would end the session); when the id of the request it
// answers can be read from its start, an error answer for that id takes
// its place.
func (t *commandTransport) pass(line []byte, over bool) []byte {
	g := t.g
	line = bytes.TrimSpace(line)
	if over {
		if id, ok := leadingID(line); ok {
			return append(g.tooLarge(id), '\n')
		}
		g.log.Warn("mcp gateway: dropped an upstream line larger than the bound", "max_message", g.cfg.MaxMessage)
		return nil
	}
	if len(line) == 0 {
		return nil
	}
	if msg, _ := g.check(line, nil, t.slot); msg != nil {
		return append(msg, '\n')
	}
	return nil
}

// slot is the slot of the call in flight with id.
func (t *commandTransport) slot(id jsonrpc.ID) *slot {
	s, _ := t.slots.Load(id)
	sl, _ := s.(*slot)
	return sl
}

// lineFilter passes the lines of in (at most max bytes each) through pass.
type lineFilter struct {
	in   *bufio.Reader
	max  int
	pass func(line []byte, over bool) []byte
	out  bytes.Buffer
}

func (l *lineFilter) Read(p []byte) (int, error) {
	for l.out.Len() == 0 {
		line, over, err := readLine(l.in, l.max)
		l.out.Write(l.pass(line, over))
		if err != nil && l.out.Len() == 0 {
			return 0, err
		}
	}
	return l.out.Read(p)
}

// leadingID reads the "id" of a JSON-RPC response from the start of line
// (SDKs write it before the result).
func leadingID(line []byte) (jsonrpc.ID, bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return jsonrpc.ID{}, false
	}
	for dec.More() {
		k, err := dec.Token()
		var v any
		if err != nil || dec.Decode(&v) != nil {
			return jsonrpc.ID{}, false
		}
		if k != "id" {
			continue
		}
		if n, ok := v.(json.Number); ok {
			if v, err = n.Float64(); err != nil {
				return jsonrpc.ID{}, false
			}
		}
		id, err := jsonrpc.MakeID(v)
		return id, err == nil && id.IsValid()
	}
	return jsonrpc.ID{}, false
}
