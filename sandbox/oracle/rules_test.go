package oracle

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox/business"
)

// Every business process has the oracle's rules, and no rules are for a
// process the registry does not know.
func TestRulesCoverTheRegistry(t *testing.T) {
	got := slices.Sorted(maps.Keys(rules))
	want := slices.Sorted(slices.Values(business.Names()))
	require.Equal(t, want, got)
	for _, name := range business.Names() {
		require.NotNil(t, rules[name], name)
	}
}
