package repotest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClientImportsNoServerPackage: client/ and client/webhook are for
// users' programs; of this module they use only the root (domain types).
func TestClientImportsNoServerPackage(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./client", "./client/webhook")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		switch {
		case !strings.HasPrefix(p, "github.com/commitlayer/commitlayer"):
		case p == "github.com/commitlayer/commitlayer", strings.HasPrefix(p, "github.com/commitlayer/commitlayer/client"):
		default:
			bad = append(bad, p)
		}
	}
	require.Empty(t, bad, "the client depends on server packages")
}
