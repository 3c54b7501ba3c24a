package mcpgw_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/mcpgw"
)

// The key-protection test runs three processes: a gateway (this binary as
// "mcpgw-gateway", its key in COMMITLAYER_API_KEY), and as its upstream
// command this binary again as "mcpgw-peek", started directly or through
// /bin/sh -c. The peek tool reads what it can of its parent's and
// grandparent's /proc/PID/environ and memory and reports whether the key
// is there. All run as one user (nobody when the test runs as root, whose
// CAP_SYS_PTRACE no protection stops).

const protectKey = "cl_protect_test_key_7d0e6b2a"

func init() {
	helpers["mcpgw-peek"] = peekUpstream
	helpers["mcpgw-gateway"] = protectedGateway
	helpers["mcpgw-scrub"] = func() {
		if err := mcpgw.ScrubInitialEnv("COMMITLAYER_API_KEY"); err != nil {
			fmt.Println("scrub:", err)
			return
		}
		b, err := os.ReadFile("/proc/self/environ")
		fmt.Printf("environ holds key: %t %v\n", bytes.Contains(b, []byte(protectKey)), err)
	}
}

// peekReport is what the peek tool saw of one process.
type peekReport struct {
	PID             int    `json:"pid"`
	EnvironErr      string `json:"environ_err"`
	EnvironHoldsKey bool   `json:"environ_holds_key"`
	MemErr          string `json:"mem_err"`
	MemHoldsKey     bool   `json:"mem_holds_key"`
}

func peekUpstream() {
	s := mcp.NewServer(&mcp.Implementation{Name: "peek", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "peek", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			parent := os.Getppid()
			out := []peekReport{peek(parent), peek(ppidOf(parent))}
			b, _ := json.Marshal(out)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

func ppidOf(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	n, _ := strconv.Atoi(string(f[1]))
	return n
}

// peek reads pid's environ, and every readable region of its memory.
func peek(pid int) peekReport {
	r := peekReport{PID: pid}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		r.EnvironErr = err.Error()
	}
	r.EnvironHoldsKey = bytes.Contains(env, []byte(protectKey))
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		r.MemErr = err.Error()
		return r
	}
	defer mem.Close()
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		r.MemErr = err.Error()
		return r
	}
	defer maps.Close()
	sc := bufio.NewScanner(maps)
	for sc.Scan() && !r.MemHoldsKey {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		a, _ := strconv.ParseUint(lo, 16, 64)
		b, _ := strconv.ParseUint(hi, 16, 64)
		if b-a > 256<<20 {
			continue
		}
		buf := make([]byte, b-a)
		if n, _ := mem.ReadAt(buf, int64(a)); n > 0 {
			r.MemHoldsKey = bytes.Contains(buf[:n], []byte(protectKey))
		}
	}
	return r
}

type nopRecorder struct{}

func (nopRecorder) Bindings(context.Context) (*contracts.Bindings, error) {
	return contracts.NewBindings(nil), nil
}
func (nopRecorder) Record(context.Context, commitlayer.Action, string, bool, time.Duration) (client.Accepted, error) {
	return client.Accepted{}, nil
}
func (nopRecorder) RecordAttempt(context.Context, string, string, commitlayer.Claim, json.RawMessage, bool, time.Duration) (client.Accepted, error) {
	return client.Accepted{}, nil
}

// protectedGateway serves the gateway on stdio in front of the peek
// upstream, after ProtectKey unless MCPGW_TEST_UNPROTECTED is set.
func protectedGateway() {
	if os.Getenv("MCPGW_TEST_UNPROTECTED") == "" {
		if err := mcpgw.ProtectKey(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	self, _ := os.Executable()
	argv := []string{self, "mcpgw-peek"}
	if os.Getenv("MCPGW_TEST_VIA_SH") != "" {
		argv = []string{"/bin/sh", "-c", self + " mcpgw-peek; true"}
	}
	ctx := context.Background()
	g, err := mcpgw.New(ctx, mcpgw.Config{Recorder: nopRecorder{}, Upstream: mcpgw.Upstream{Command: argv}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer g.Close()
	_ = g.ServeStdio(ctx)
}

// helperBinary is this test binary where the user the helpers run as can
// run it.
func helperBinary(t *testing.T) (string, *syscall.SysProcAttr) {
	if os.Geteuid() != 0 {
		return os.Args[0], nil
	}
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			require.NoError(t, os.Chmod(d, st.Mode().Perm()|0o011))
		}
	}
	src, err := os.Open(os.Args[0])
	require.NoError(t, err)
	defer src.Close()
	bin := filepath.Join(dir, "mcpgw-helper")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	return bin, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}

// TestKeyKeptFromUpstreamCommand: an upstream command, started directly or
// through sh, reads neither the gateway's environ nor its memory once the
// gateway protected its key; without the protection it reads the key in
// both (the test would catch its loss).
func TestKeyKeptFromUpstreamCommand(t *testing.T) {
	bin, attr := helperBinary(t)
	for _, c := range []struct {
		name              string
		viaSh, unprotectd bool
	}{{"direct", false, false}, {"through sh", true, false}, {"unprotected", false, true}, {"unprotected through sh", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, "mcpgw-gateway")
			cmd.Env = append(os.Environ(), "COMMITLAYER_API_KEY="+protectKey, "HOME=/tmp")
			if c.viaSh {
				cmd.Env = append(cmd.Env, "MCPGW_TEST_VIA_SH=1")
			}
			if c.unprotectd {
				cmd.Env = append(cmd.Env, "MCPGW_TEST_UNPROTECTED=1")
			}
			cmd.SysProcAttr = attr
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			require.NoError(t, err, "%s", stderr.String())
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "peek"})
			require.NoError(t, err)
			var seen []peekReport
			require.NoError(t, json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &seen), "%v", res.Content)
			gw := seen[0] // the gateway is the peek's parent, or its grandparent through sh
			if c.viaSh {
				gw = seen[1]
			}
			require.Equal(t, cmd.Process.Pid, gw.PID)
			if c.unprotectd {
				require.True(t, gw.EnvironHoldsKey, "unprotected, the key is readable in environ: %+v", gw)
				require.True(t, gw.MemHoldsKey, "unprotected, the key is readable in memory: %+v", gw)
				return
			}
			for _, r := range seen {
				require.False(t, r.EnvironHoldsKey, "%+v", r)
				require.False(t, r.MemHoldsKey, "%+v", r)
			}
			require.Contains(t, gw.EnvironErr, "permission denied")
			require.Contains(t, gw.MemErr, "permission denied")
		})
	}

	// The initial environment itself is overwritten (what /proc/PID/environ
	// shows, were the process dumpable again).
	cmd := exec.Command(bin, "mcpgw-scrub")
	cmd.Env = append(os.Environ(), "COMMITLAYER_API_KEY="+protectKey)
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "environ holds key: false <nil>")
}
