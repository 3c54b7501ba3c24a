package commitlayer_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

func TestClipNeverSplitsARune(t *testing.T) {
	require.Equal(t, "abc", commitlayer.Clip("abc", 3))
	require.Equal(t, "ab…", commitlayer.Clip("abcd", 2))
	s := strings.Repeat("é", 10) + "😀😀"
	for n := 0; n <= len(s); n++ {
		c := commitlayer.Clip(s, n)
		require.True(t, utf8.ValidString(c), "n=%d: %q", n, c)
		require.LessOrEqual(t, len(strings.TrimSuffix(c, "…")), n)
	}
}
