package sinks

import (
	"fmt"
	"log/slog"
	"strings"
)

// Environment variables the sinks read.
const (
	EnvBraintrustKey     = "BRAINTRUST_API_KEY"
	EnvBraintrustURL     = "BRAINTRUST_API_URL"
	EnvBraintrustProject = "BRAINTRUST_PROJECT"
	EnvLangSmithKey      = "LANGSMITH_API_KEY"
	EnvLangSmithURL      = "LANGSMITH_ENDPOINT"
	EnvLangSmithSpace    = "LANGSMITH_WORKSPACE_ID"
)

// Names are the sinks FromEnv knows.
var Names = []string{"braintrust", "langsmith"}

// ParseNames splits a --sinks value ("braintrust,langsmith") into known,
// distinct sink names.
func ParseNames(list string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(list, ",") {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == "" {
			continue
		}
		known := false
		for _, k := range Names {
			known = known || k == n
		}
		if !known {
			return nil, fmt.Errorf("sinks: unknown sink %q (known: %s)", n, strings.Join(Names, ", "))
		}
		dup := false
		for _, o := range out {
			dup = dup || o == n
		}
		if !dup {
			out = append(out, n)
		}
	}
	return out, nil
}

// FromEnv builds the named sinks from the environment (getenv, e.g.
// os.Getenv). A sink whose key is not set is an error naming the variable.
func FromEnv(names []string, getenv func(string) string, logger *slog.Logger) ([]Sink, error) {
	var out []Sink
	for _, n := range names {
		switch n {
		case "braintrust":
			if getenv(EnvBraintrustKey) == "" {
				return nil, fmt.Errorf("sinks: braintrust needs %s", EnvBraintrustKey)
			}
			s, err := NewBraintrust(Options{APIKey: getenv(EnvBraintrustKey), BaseURL: getenv(EnvBraintrustURL),
				Logger: logger}, getenv(EnvBraintrustProject))
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		case "langsmith":
			if getenv(EnvLangSmithKey) == "" {
				return nil, fmt.Errorf("sinks: langsmith needs %s", EnvLangSmithKey)
			}
			s, err := NewLangSmith(Options{APIKey: getenv(EnvLangSmithKey), BaseURL: getenv(EnvLangSmithURL),
				Logger: logger}, getenv(EnvLangSmithSpace))
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		default:
			return nil, fmt.Errorf("sinks: unknown sink %q (known: %s)", n, strings.Join(Names, ", "))
		}
	}
	return out, nil
}
