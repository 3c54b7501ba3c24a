package worker

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"
)

func TestReadBuild(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.WriteFile(exe, []byte("a binary"), 0o600))
	exeOK := func() (string, error) { return exe, nil }
	info := func(version string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: version}, Settings: settings}, true
		}
	}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "0123abcd"}

	b := readBuild(info("(devel)", rev, debug.BuildSetting{Key: "vcs.modified", Value: "false"}), exeOK)
	require.Equal(t, Build{Version: "(devel)", ID: "0123abcd", Source: "vcs", GoVersion: "go1.26.8"}, b)

	b = readBuild(info("(devel)", rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"}), exeOK)
	require.Equal(t, "0123abcd+dirty", b.ID, "a modified tree is another build")

	b = readBuild(info("v1.2.3"), exeOK)
	require.Equal(t, "v1.2.3", b.ID)
	require.Equal(t, "module", b.Source)

	b = readBuild(info("(devel)"), exeOK)
	require.Equal(t, "executable", b.Source)
	require.True(t, strings.HasPrefix(b.ID, "exe-") && len(b.ID) == len("exe-")+16, b.ID)
	again := readBuild(info("(devel)"), exeOK)
	require.Equal(t, b.ID, again.ID, "the same binary has the same ID")
	require.NoError(t, os.WriteFile(exe, []byte("another binary"), 0o600))
	require.NotEqual(t, b.ID, readBuild(info("(devel)"), exeOK).ID, "another binary another ID")

	b = readBuild(func() (*debug.BuildInfo, bool) { return nil, false }, func() (string, error) { return "", errors.New("no") })
	require.Equal(t, "exe-unknown", b.ID)

	buildID = "release-7"
	t.Cleanup(func() { buildID = "" })
	b = readBuild(info("(devel)", rev), exeOK)
	require.Equal(t, Build{Version: "(devel)", ID: "release-7", Source: "ldflags", GoVersion: "go1.26.8"}, b, "the link-time ID wins")
}

func TestDeploymentValidate(t *testing.T) {
	require.NoError(t, Deployment{}.Validate(), "unversioned")
	require.NoError(t, Deployment{Name: "commitlayer", BuildID: "abc+dirty"}.Validate())
	for _, d := range []Deployment{
		{Name: "commitlayer"},
		{Name: "commit.layer", BuildID: "b"},
		{Name: "commitlayer", BuildID: "with space"},
		{Name: strings.Repeat("n", 256), BuildID: "b"},
	} {
		require.Error(t, d.Validate(), "%+v", d)
	}
	require.Equal(t, "unversioned", Deployment{}.String())
	require.Equal(t, "commitlayer.b1", Deployment{Name: "commitlayer", BuildID: "b1"}.String())
	require.Equal(t, sdkworker.DeploymentOptions{}, Deployment{}.options())
	opts := Deployment{Name: "commitlayer", BuildID: "b1"}.options()
	require.True(t, opts.UseVersioning)
	require.Equal(t, sdkworker.WorkerDeploymentVersion{DeploymentName: "commitlayer", BuildID: "b1"}, opts.Version)
}

func TestParseCurrentPolicy(t *testing.T) {
	for in, want := range map[string]CurrentPolicy{"": CurrentIfNone, "auto": CurrentIfNone, " always ": CurrentAlways, "never": CurrentNever} {
		got, err := ParseCurrentPolicy(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := ParseCurrentPolicy("sometimes")
	require.ErrorContains(t, err, "COMMITLAYER_MAKE_CURRENT")
}
