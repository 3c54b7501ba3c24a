package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// DevServer is a Temporal dev server of one test's own: `temporal server
// start-dev` on free loopback ports with its own SQLite file, which the
// test may stop and start again (same file, same port) to play an outage
// without touching the shared server other tests use.
type DevServer struct {
	t      testing.TB
	bin    string
	dbFile string
	port   int
	uiPort int
	cmd    *exec.Cmd
	exited chan struct{}
}

// devServerStartTimeout bounds one start of a private dev server.
const devServerStartTimeout = 90 * time.Second

// StartDevServer starts a private dev server and stops it when the test
// ends. Without the `temporal` CLI on PATH the test is skipped (failed with
// COMMITLAYER_INTEGRATION=1).
func StartDevServer(t testing.TB) *DevServer {
	t.Helper()
	bin, err := exec.LookPath("temporal")
	if err != nil {
		unavailable(t, "testenv: no temporal CLI on PATH (make up installs it): %v", err)
	}
	d := &DevServer{t: t, bin: bin, dbFile: filepath.Join(t.TempDir(), "temporal.db"), port: freePort(t), uiPort: freePort(t)}
	t.Cleanup(d.Stop)
	d.Start()
	return d
}

// Address is the server's frontend host:port.
func (d *DevServer) Address() string { return "127.0.0.1:" + strconv.Itoa(d.port) }

// Start starts the server (again) and waits until it serves.
func (d *DevServer) Start() {
	d.t.Helper()
	if d.cmd != nil {
		d.t.Fatalf("testenv: dev server already running")
	}
	args := []string{"server", "start-dev", "--headless", "--ip", "127.0.0.1",
		"--port", strconv.Itoa(d.port), "--ui-port", strconv.Itoa(d.uiPort), "--db-filename", d.dbFile,
		"--log-level", "error",
		"--dynamic-config-value", `history.transferProcessorMaxPollInterval="1s"`,
		"--dynamic-config-value", `history.timerProcessorMaxPollInterval="1s"`,
		"--dynamic-config-value", `history.visibilityProcessorMaxPollInterval="1s"`,
	}
	cmd := exec.Command(d.bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logFile, err := os.Create(filepath.Join(filepath.Dir(d.dbFile), fmt.Sprintf("temporal-%d.log", time.Now().UnixNano())))
	if err != nil {
		d.t.Fatalf("testenv: dev server log: %v", err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		d.t.Fatalf("testenv: start dev server: %v", err)
	}
	d.cmd, d.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(d.exited)
	}()
	deadline := time.Now().Add(devServerStartTimeout)
	for {
		if err := d.healthy(); err == nil {
			return
		} else if time.Now().After(deadline) {
			d.Stop()
			d.t.Fatalf("testenv: dev server at %s did not serve within %s: %v", d.Address(), devServerStartTimeout, err)
		}
		select {
		case <-d.exited:
			d.cmd = nil
			d.t.Fatalf("testenv: dev server exited while starting (log in %s)", filepath.Dir(d.dbFile))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (d *DevServer) healthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: d.Address(), Logger: quietLogger{}})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}

// Stop ends the server (its process group) and waits for it; the SQLite
// file stays for the next Start. Stopping a stopped server does nothing.
func (d *DevServer) Stop() {
	if d.cmd == nil {
		return
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
	}
	d.cmd = nil
}

// freePort asks the kernel for a free loopback TCP port.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// quietLogger drops the SDK's log lines while probing.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
