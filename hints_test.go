package commitlayer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHintCoversEveryCode(t *testing.T) {
	for _, c := range Codes {
		_, ok := hints[c]
		require.True(t, ok, "code %s has no remedy in the table", c)
		require.True(t, Hint(c).Valid(), "code %s", c)
	}
	require.Len(t, hints, len(Codes), "the table names a code that Codes does not list")
}

func TestHint(t *testing.T) {
	tests := []struct {
		code Code
		want Remedy
	}{
		{CodeMissingEffect, RemedyHumanReview},
		{CodeDuplicateEffect, RemedyCompensate},
		{CodeForbiddenEffect, RemedyCompensate},
		{CodeEffectDiffers, RemedyHumanReview},
		{CodeEffectReversed, RemedyHumanReview},
		{CodePolicyViolation, RemedyHumanReview},
		{CodeLimitExceeded, RemedyCompensate},
		{CodeSourceUnavailable, RemedyRetryRead},
		{CodeNoSignal, RemedyRetryRead},
		{Code("made_up"), RemedyHumanReview},
		{Code(""), RemedyHumanReview},
	}
	for _, tt := range tests {
		t.Run(string(tt.code), func(t *testing.T) {
			require.Equal(t, tt.want, Hint(tt.code))
		})
	}
}

func TestHintFor(t *testing.T) {
	overrides := map[string]Remedy{"refund": RemedyRetryRead, "bogus": Remedy("reboot"), "quiet": RemedyNone}
	tests := []struct {
		name  string
		code  Code
		check string
		want  Remedy
	}{
		{"override wins", CodeMissingEffect, "refund", RemedyRetryRead},
		{"override to none", CodeDuplicateEffect, "quiet", RemedyNone},
		{"invalid override falls back", CodeDuplicateEffect, "bogus", RemedyCompensate},
		{"other check uses table", CodeMissingEffect, "other", RemedyHumanReview},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, HintFor(tt.code, tt.check, overrides))
		})
	}
	require.Equal(t, RemedyCompensate, HintFor(CodeForbiddenEffect, "x", nil))
}

func TestRemedyValid(t *testing.T) {
	for _, r := range Remedies {
		require.True(t, r.Valid())
	}
	require.False(t, Remedy("").Valid())
	require.False(t, Remedy("Retry_Read").Valid())
}
