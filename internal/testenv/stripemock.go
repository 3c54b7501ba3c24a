package testenv

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// StripeMockVersion is the stripe-mock the wire checks are written against:
//
//	go install github.com/stripe/stripe-mock@v0.203.0
const StripeMockVersion = "v0.203.0"

// EnvStripeMock, when set, is the stripe-mock binary to run; otherwise it is
// looked up on PATH and then in $(go env GOPATH)/bin.
const EnvStripeMock = "STRIPE_MOCK_BIN"

var stripeMockHTTP = regexp.MustCompile(`Listening for HTTP at address: (\S+)`)

// StripeMock starts a stripe-mock of its own on loopback ports chosen by the
// system and returns its plain-HTTP base URL ("http://127.0.0.1:PORT"); it
// is stopped when t ends. Without the binary the test is skipped (or fails
// with COMMITLAYER_INTEGRATION=1). stripe-mock checks requests against
// Stripe's OpenAPI spec and keeps no state.
func StripeMock(t testing.TB) string {
	t.Helper()
	bin := stripeMockBinary()
	if bin == "" {
		unavailable(t, "stripe-mock is not installed: go install github.com/stripe/stripe-mock@%s", StripeMockVersion)
		return ""
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Both addresses on 127.0.0.1:0: without -https-addr it also listens on
	// every interface.
	cmd := exec.CommandContext(ctx, bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatalf("stripe-mock: %v", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		cancel()
		unavailable(t, "stripe-mock %s does not start: %v", bin, err)
		return ""
	}
	t.Cleanup(func() {
		cancel() // kills this process only
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		found := false
		for sc.Scan() {
			if m := stripeMockHTTP.FindStringSubmatch(sc.Text()); m != nil && !found {
				found = true
				addr <- m[1]
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("stripe-mock exited without saying where it listens")
		}
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("stripe-mock listens on %s, not loopback", a)
		}
		return "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatalf("stripe-mock did not listen within 60 s")
	}
	return ""
}

func stripeMockBinary() string {
	if b := os.Getenv(EnvStripeMock); b != "" {
		return b
	}
	if b, err := exec.LookPath("stripe-mock"); err == nil {
		return b
	}
	name := "stripe-mock"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if gp := os.Getenv("GOPATH"); gp != "" {
		for _, p := range filepath.SplitList(gp) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	} else if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		if st, err := os.Stat(filepath.Join(d, name)); err == nil && !st.IsDir() {
			return filepath.Join(d, name)
		}
	}
	return ""
}
