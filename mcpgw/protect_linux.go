package mcpgw

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ProtectKey keeps the CommitLayer key (COMMITLAYER_API_KEY) from the
// processes the gateway starts, which run as the same user: it removes the
// variable from the environment (no child inherits it), overwrites it
// where the kernel shows the process's initial environment
// (/proc/PID/environ reads the start of its stack, which Go never
// changes), and makes the process non-dumpable, so that a same-user
// process can neither ptrace it nor open its /proc/PID/environ, mem, maps
// or fd (they become root's). Call it once, before the gateway starts a
// command. A process with CAP_SYS_PTRACE (root) is not kept out.
func ProtectKey() error {
	if err := os.Unsetenv(envKey); err != nil {
		return fmt.Errorf("protect key: %w", err)
	}
	if err := scrubInitialEnv(envKey); err != nil {
		return fmt.Errorf("protect key: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("protect key: make the process non-dumpable: %w", err)
	}
	return nil
}

// scrubInitialEnv overwrites the value of name in the process's initial
// environment, found through /proc/self/stat (env_start, env_end) and
// written through /proc/self/mem.
func scrubInitialEnv(name string) error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	f := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:]) // f[0] is field 3
	if len(f) < 49 {
		return fmt.Errorf("/proc/self/stat has %d fields", len(f)+2)
	}
	start, err1 := strconv.ParseInt(string(f[47]), 10, 64) // field 50, env_start
	end, err2 := strconv.ParseInt(string(f[48]), 10, 64)   // field 51, env_end
	if err1 != nil || err2 != nil || end <= start || end-start > 64<<20 {
		return fmt.Errorf("/proc/self/stat: no environment range")
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	env := make([]byte, end-start)
	if _, err := mem.ReadAt(env, start); err != nil {
		return fmt.Errorf("read the initial environment: %w", err)
	}
	off := 0
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(name+"=")); ok && len(v) > 0 {
			at := start + int64(off+len(name)+1)
			if _, err := mem.WriteAt(make([]byte, len(v)), at); err != nil {
				return fmt.Errorf("overwrite the initial environment: %w", err)
			}
		}
		off += len(kv) + 1
	}
	return nil
}
