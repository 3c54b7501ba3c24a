package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

// fakeTB records what a helper did to its test: a skip or a failure ends the helper as the real ones
// do (runtime.Goexit), so code after them never runs.
type fakeTB struct {
	testing.TB
	mu      sync.Mutex
	skipped string
	failed  string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.mu.Lock()
	f.skipped = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// call runs fn with a fakeTB in its own goroutine and reports what happened.
func call[T any](t *testing.T, fn func(testing.TB) T) (result T, returned bool, fake *fakeTB) {
	t.Helper()
	fake = &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		result = fn(fake)
		returned = true
	}()
	<-done
	return result, returned, fake
}

func TestIntegration(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  bool
	}{
		{"1", true},
		{"true", true},
		{"TRUE", true},
		{" yes ", true},
		{"", false},
		{"0", false},
		{"false", false},
		{"no", false},
		{"2", false},
		{"on-ish", false},
	} {
		t.Run(fmt.Sprintf("%q", tc.value), func(t *testing.T) {
			t.Setenv(EnvIntegration, tc.value)
			require.Equal(t, tc.want, Integration())
		})
	}
}

func TestNamespace(t *testing.T) {
	t.Setenv(EnvTemporalNamespace, "")
	require.Equal(t, "default", Namespace())
	t.Setenv(EnvTemporalNamespace, "  ")
	require.Equal(t, "default", Namespace())
	t.Setenv(EnvTemporalNamespace, "staging")
	require.Equal(t, "staging", Namespace())
}

func TestUnavailableSkipsOrFails(t *testing.T) {
	fn := func(tb testing.TB) bool {
		unavailable(tb, "no %s here", "thing")
		return true
	}

	t.Setenv(EnvIntegration, "")
	_, returned, fake := call(t, fn)
	require.False(t, returned, "unavailable must stop the test")
	require.Empty(t, fake.failed)
	require.Contains(t, fake.skipped, "no thing here")
	require.Contains(t, fake.skipped, EnvIntegration+"=1")

	t.Setenv(EnvIntegration, "1")
	_, returned, fake = call(t, fn)
	require.False(t, returned)
	require.Empty(t, fake.skipped)
	require.Contains(t, fake.failed, "no thing here")
}

type fakeRunner struct {
	run func() int
}

func (f fakeRunner) Run() int { return f.run() }

func TestRunKeepsExitCodeWithoutDatabase(t *testing.T) {
	for _, code := range []int{0, 1, 3} {
		var db procDB
		ran := false
		got := run(fakeRunner{func() int { ran = true; return code }}, &db)
		require.True(t, ran)
		require.Equal(t, code, got)
	}
}

// repoRoot finds the module root above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test directory")
		dir = parent
	}
}

// environWithout returns the environment minus the named variables, plus extra.
func environWithout(drop []string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, d := range drop {
			if name == d {
				keep = false
				break
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}
