package testenv

// Checks of the deployment files at the repository root: docker-compose.yml, Dockerfile.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image         string            `yaml:"image"`
	ContainerName string            `yaml:"container_name"`
	Build         any               `yaml:"build"`
	Command       []string          `yaml:"command"`
	Environment   map[string]string `yaml:"environment"`
	Ports         []string          `yaml:"ports"`
	Volumes       []string          `yaml:"volumes"`
	DependsOn     map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docker-compose.yml"))
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(raw, &f))
	return f
}

// secretName matches environment variables that carry credentials.
var secretName = regexp.MustCompile(`(?i)(PASSWORD|SECRET|TOKEN|API_KEY|ADMIN_KEY|DATABASE_URL)`)

// requiredVar matches a compose interpolation that refuses to run when the variable is unset.
var requiredVar = regexp.MustCompile(`\$\{[A-Z_][A-Z0-9_]*:\?[^}]*\}`)

func TestComposeServices(t *testing.T) {
	f := loadCompose(t)
	for _, name := range []string{"postgres", "temporal-schema", "temporal", "temporal-init", "migrate", "worker", "api"} {
		require.Contains(t, f.Services, name)
	}
	require.Regexp(t, `temporalio/server:\d+\.\d+\.\d+\}?$`, f.Services["temporal"].Image, "Temporal's own server, pinned")
	require.Regexp(t, `temporalio/admin-tools:\d+\.\d+\.\d+\}?$`, f.Services["temporal-schema"].Image)
	require.Equal(t, "service_completed_successfully", f.Services["temporal"].DependsOn["temporal-schema"].Condition)
	init := strings.Join(f.Services["temporal-init"].Command, " ")
	for _, sa := range []string{"CommitLayerVerdict=Keyword", "CommitLayerContract=Keyword", "CommitLayerAgent=Keyword",
		"CommitLayerSubject=Keyword", "CommitLayerTenant=Keyword", "CommitLayerProvisional=Bool",
		"CommitLayerRun=Keyword", "CommitLayerScenario=Keyword", "CommitLayerAgree=Keyword"} {
		require.Contains(t, init, sa)
	}
	require.Regexp(t, `^postgres:15(\.|$)`, f.Services["postgres"].Image)
	require.Contains(t, f.Volumes, "postgres-data", "PostgreSQL keeps its data in a named volume")
	require.Contains(t, f.Services["postgres"].Volumes, "postgres-data:/var/lib/postgresql/data")
	for _, name := range []string{"worker", "api"} {
		svc := f.Services[name]
		require.NotNil(t, svc.Build, "%s is built from the Dockerfile", name)
		require.Equal(t, []string{name}, svc.Command)
		require.Equal(t, "service_completed_successfully", svc.DependsOn["temporal-init"].Condition, name)
		require.Equal(t, "temporal:7233", svc.Environment["TEMPORAL_ADDRESS"], name)
		require.Contains(t, svc.Environment, "DATABASE_URL", name)
	}
	require.Empty(t, f.Services["worker"].Ports, "a scaled worker publishes no port")
	require.Empty(t, f.Services["worker"].ContainerName, "a scaled worker has no fixed name")
	for _, name := range []string{"temporal", "postgres", "api"} {
		require.NotNil(t, f.Services[name].Healthcheck, "%s has a healthcheck", name)
	}
	require.Equal(t, "service_healthy", f.Services["migrate"].DependsOn["postgres"].Condition)
	require.Contains(t, f.Services["api"].Environment, "COMMITLAYER_ADMIN_KEY")
	require.NotContains(t, f.Services["worker"].Environment, "COMMITLAYER_ADMIN_KEY", "only the API holds the admin key")
}

func TestComposeHasNoSecrets(t *testing.T) {
	f := loadCompose(t)
	checked := 0
	for name, svc := range f.Services {
		for key, value := range svc.Environment {
			if !secretName.MatchString(key) {
				continue
			}
			checked++
			require.Regexp(t, requiredVar, value, "%s.%s must come from the environment with ${VAR:?}", name, key)
			// Whatever is left once the variables are taken out must not be a credential.
			rest := requiredVar.ReplaceAllString(value, "")
			require.NotRegexp(t, `:[^/@]+@`, rest, "%s.%s has a literal password", name, key)
		}
		for _, p := range svc.Ports {
			require.True(t, strings.HasPrefix(p, "127.0.0.1:"), "%s publishes %s beyond the loopback", name, p)
		}
	}
	require.GreaterOrEqual(t, checked, 4, "the admin key, database password and URLs were checked")
}

// composeCommand returns how to run compose here: the docker CLI plugin or docker-compose.
func composeCommand(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("docker"); err == nil {
		if exec.Command("docker", "compose", "version").Run() == nil {
			return []string{"docker", "compose"}
		}
	}
	if _, err := exec.LookPath("docker-compose"); err == nil {
		return []string{"docker-compose"}
	}
	t.Skip("neither `docker compose` nor docker-compose is installed")
	return nil
}

func TestComposeConfig(t *testing.T) {
	compose := composeCommand(t)
	root := repoRoot(t)
	secrets := []string{"COMMITLAYER_ADMIN_KEY", "POSTGRES_PASSWORD"}
	config := func(env []string) (string, error) {
		args := append(compose[1:], "--project-directory", root, "-f", filepath.Join(root, "docker-compose.yml"), "config", "-q")
		cmd := exec.Command(compose[0], args...)
		cmd.Dir = root
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	out, err := config(environWithout(secrets, "COMMITLAYER_ADMIN_KEY=k", "POSTGRES_PASSWORD=p"))
	require.NoError(t, err, out)

	for _, missing := range secrets {
		env := environWithout(secrets)
		for _, s := range secrets {
			if s != missing {
				env = append(env, s+"=x")
			}
		}
		out, err = config(env)
		require.Error(t, err, "compose must refuse to run without %s", missing)
		require.Contains(t, out, "set "+missing)
	}
}

func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	require.NoError(t, err)
	var froms, users []string
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			froms = append(froms, line)
		case "USER":
			users = append(users, fields[1])
		}
	}
	require.GreaterOrEqual(t, len(froms), 2, "multi-stage")
	require.Contains(t, string(raw), "CGO_ENABLED=0", "static binary")
	require.Contains(t, string(raw), "./cmd/commitlayer")
	require.NotEmpty(t, users, "the image sets a user")
	last := users[len(users)-1]
	require.NotContains(t, []string{"root", "0", "0:0"}, last, "the process does not run as root")
	// The last USER must come after the last FROM (it applies to the run stage).
	require.Greater(t, strings.LastIndex(string(raw), "USER "), strings.LastIndex(string(raw), "FROM "))
}
