package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/mcpgw"
)

const mcpUsage = `usage: commitlayer mcp (-upstream URL | -upstream-cmd "COMMAND") [flags]

An MCP gateway in front of an upstream MCP server: it serves the upstream's
tools as its own (Streamable HTTP at http://ADDR/mcp, or stdio with -stdio),
forwards every call, and records each call of a tool the tenant's contracts
bind as a CommitLayer action (docs/recording.md).

environment:
  COMMITLAYER_URL      the CommitLayer API (default http://127.0.0.1:8080)
  COMMITLAYER_API_KEY  the tenant key actions are recorded with (required; never sent upstream, never
                       logged; removed from the environment and, on Linux, kept from the upstream command)

flags:
`

// headerFlags collects repeated -upstream-header "Name: value" flags.
type headerFlags http.Header

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return fmt.Errorf("%q is not \"Name: value\"", commitlayer.Clip(v, 24))
	}
	http.Header(h).Add(name, strings.TrimSpace(value))
	return nil
}

type mcpOptions struct {
	upstream, upstreamCmd string
	header                http.Header
	addr                  string
	stdio                 bool
	agent                 string
	wait                  string
	waitTimeout           time.Duration
	forwardAuth           bool
	refresh               time.Duration
	recordTimeout         time.Duration
	sessionIdle           time.Duration
	callTimeout           time.Duration
	maxMessage            int
	maxListPages          int
	maxListBytes          int
}

func parseMCPFlags(args []string, stderr io.Writer) (mcpOptions, error) {
	o := mcpOptions{header: http.Header{}}
	fs := flag.NewFlagSet("commitlayer mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, mcpUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.upstream, "upstream", "", "the upstream MCP server's Streamable HTTP `URL`")
	fs.StringVar(&o.upstreamCmd, "upstream-cmd", "", "the upstream MCP server as a `command` speaking MCP on stdio (run with /bin/sh -c; COMMITLAYER_API_KEY is removed from its environment)")
	fs.Var(headerFlags(o.header), "upstream-header", "a `Name: value` header sent on every request to an HTTP upstream (its own auth); repeatable")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8091", "listen `address` of the Streamable HTTP endpoint /mcp")
	fs.BoolVar(&o.stdio, "stdio", false, "serve MCP on stdin/stdout instead of HTTP (logs go to stderr)")
	fs.StringVar(&o.agent, "agent", "", "the agent `name` in recorded actions (default: the MCP client's name)")
	fs.StringVar(&o.wait, "wait", "", "`provisional`: answer a bound call only once its provisional verdict is in, and say so in the result when it is FAIL")
	fs.DurationVar(&o.waitTimeout, "wait-timeout", 10*time.Second, "bound of -wait (at most 60s)")
	fs.BoolVar(&o.forwardAuth, "forward-auth", true, "forward the agent's Authorization header to an HTTP upstream on its calls")
	fs.DurationVar(&o.refresh, "bindings-refresh", 30*time.Second, "how often the tenant's contract bindings are fetched again")
	fs.DurationVar(&o.sessionIdle, "session-idle-timeout", 0, "end an HTTP session that sent no request for this long (its next request is 404 and the agent initializes again); 0 keeps sessions until the agent ends them")
	fs.DurationVar(&o.callTimeout, "call-timeout", mcpgw.DefaultCallTimeout, "bound of each request forwarded upstream: then the agent gets an error naming it and the upstream a cancellation")
	fs.IntVar(&o.maxMessage, "max-message", mcpgw.DefaultMaxMessage, "bound in `bytes` of one message from the upstream (a result, an SSE event, a stdio line); a larger one is refused to its request")
	fs.IntVar(&o.maxListPages, "max-list-pages", 1000, "bound of the pages of one listing an agent pages through")
	fs.IntVar(&o.maxListBytes, "max-list-bytes", 64<<20, "bound in `bytes` of one listing an agent pages through")
	fs.DurationVar(&o.recordTimeout, "record-timeout", 5*time.Second, "how long a bound call's answer waits for CommitLayer to take its action (beyond -wait-timeout with -wait); an action not taken is posted again in the background")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	bad := func(format string, args ...any) (mcpOptions, error) {
		err := fmt.Errorf(format, args...)
		fmt.Fprintf(stderr, "commitlayer mcp: %v\n", err)
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case (o.upstream == "") == (o.upstreamCmd == ""):
		return bad("give exactly one of -upstream URL and -upstream-cmd COMMAND")
	case o.wait != "" && o.wait != "provisional":
		return bad("-wait is provisional or nothing, not %q", o.wait)
	case o.waitTimeout <= 0 || o.waitTimeout > 60*time.Second:
		return bad("-wait-timeout must be between 0 and 60s")
	case o.recordTimeout <= 0 || o.recordTimeout > 60*time.Second:
		return bad("-record-timeout must be between 0 and 60s")
	case o.refresh <= 0:
		return bad("-bindings-refresh must be positive")
	case o.sessionIdle < 0:
		return bad("-session-idle-timeout must not be negative")
	case o.callTimeout <= 0:
		return bad("-call-timeout must be positive")
	case o.maxMessage < 1024 || o.maxListPages <= 0 || o.maxListBytes < o.maxMessage:
		return bad("-max-message must be at least 1024, -max-list-pages positive, -max-list-bytes at least -max-message")
	case len(o.header) > 0 && o.upstream == "":
		return bad("-upstream-header only goes with -upstream URL")
	}
	return o, nil
}

func mcpCmd(ctx context.Context, cfg Config, logger *slog.Logger, args []string, stderr io.Writer) int {
	o, err := parseMCPFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	key, base := cfg.APIKey, cfg.APIURL
	if key == "" {
		fmt.Fprintln(stderr, "commitlayer mcp: COMMITLAYER_API_KEY is required (the tenant key actions are recorded with)")
		return 2
	}
	// Before any command starts: the key leaves the environment, and the
	// upstream command (same user) cannot read this process (docs/recording.md).
	if err := mcpgw.ProtectKey(); err != nil {
		logger.Error("commitlayer mcp", "error", err)
		return 1
	}
	httpTimeout := o.waitTimeout + 30*time.Second
	c, err := client.New(base, key, client.WithHTTPClient(&http.Client{Timeout: httpTimeout}),
		client.WithUserAgent("commitlayer-mcp/"+buildVersion()))
	if err != nil {
		fmt.Fprintf(stderr, "commitlayer mcp: COMMITLAYER_URL: %v\n", err)
		return 2
	}
	gw := mcpgw.Config{
		Recorder: &mcpgw.APIRecorder{Client: c}, Agent: o.agent, Wait: o.wait == "provisional",
		WaitTimeout: o.waitTimeout, ForwardAuth: o.forwardAuth, BindingsRefresh: o.refresh, RecordTimeout: o.recordTimeout,
		SessionIdleTimeout: o.sessionIdle, CallTimeout: o.callTimeout, MaxMessage: o.maxMessage,
		MaxListPages: o.maxListPages, MaxListBytes: o.maxListBytes,
		Logger: logger, Version: buildVersion(),
		Upstream: mcpgw.Upstream{URL: o.upstream, Header: o.header},
	}
	if o.upstreamCmd != "" {
		gw.Upstream.Command = []string{"/bin/sh", "-c", o.upstreamCmd}
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	g, err := mcpgw.New(startCtx, gw)
	cancel()
	if err != nil {
		logger.Error("commitlayer mcp", "error", err)
		return 1
	}
	defer g.Close()
	if o.stdio {
		err = g.ServeStdio(ctx)
	} else {
		err = serveMCPHTTP(ctx, logger, o.addr, g)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("commitlayer mcp", "error", err)
		return 1
	}
	return 0
}

// serveMCPHTTP serves the gateway at http://addr/mcp until ctx ends.
func serveMCPHTTP(ctx context.Context, logger *slog.Logger, addr string, g *mcpgw.Gateway) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.HTTPHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("commitlayer mcp: serving", "url", "http://"+ln.Addr().String()+"/mcp")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	}
}

// buildVersion is the module version the binary was built at, or "dev".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
