package check

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// Main runs `commitlayer check` with args (after the subcommand) and
// returns its exit code (ExitCode, or ExitBadInput naming file and line).
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("commitlayer check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var contractPaths, connected, unreachable stringList
	fs.Var(&contractPaths, "contract", "a contract file, YAML or JSON (repeatable)")
	fs.Var(&connected, "connected", "a source to count as connected though it has no fact in the run (repeatable)")
	fs.Var(&unreachable, "unreachable", "a source that could not be read in the run: its lenses are UNKNOWN (repeatable)")
	factsPath := fs.String("facts", "", "facts, one JSON object a line (the shape POST /v1/facts takes)")
	actionsPath := fs.String("actions", "", "actions, one JSON object a line (the shape POST /v1/actions takes, requested_at required)")
	junitPath := fs.String("junit", "", "also write JUnit XML to this file")
	at := fs.String("at", "", "evaluate at this RFC 3339 time (default: each action as settled)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: commitlayer check --contract FILE [--contract FILE …] --facts FILE --actions FILE [--junit FILE] [--connected SOURCE …] [--unreachable SOURCE …] [--at TIME]\n"+
			"exit codes: 0 all PASS, 1 any FAIL, 2 any UNKNOWN, 3 bad input\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return ExitBadInput
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "commitlayer check: "+format+"\n", a...)
		return ExitBadInput
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case len(contractPaths) == 0:
		return bad("--contract is required (at least one contract file)")
	case *factsPath == "":
		return bad("--facts is required")
	case *actionsPath == "":
		return bad("--actions is required")
	}
	opts := Options{Connected: connected, Unreachable: map[string]string{}}
	for _, s := range unreachable {
		opts.Unreachable[s] = "unreachable in the run"
	}
	if *at != "" {
		t, err := time.Parse(time.RFC3339Nano, *at)
		if err != nil {
			return bad("--at %q is not an RFC 3339 time", *at)
		}
		opts.At = t.UTC()
	}
	return Report(stdout, stderr, *junitPath, func() ([]Result, error) {
		return run(contractPaths, *factsPath, *actionsPath, opts)
	})
}

// Report runs verify, prints the results, writes the JUnit file when asked
// and returns the exit code.
func Report(stdout, stderr io.Writer, junitPath string, verify func() ([]Result, error)) int {
	results, err := verify()
	if err == nil {
		err = WriteText(stdout, results)
	}
	if err == nil && junitPath != "" {
		err = writeJUnitFile(junitPath, results)
	}
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			err = ie
		}
		fmt.Fprintf(stderr, "commitlayer check: %v\n", err)
		return ExitBadInput
	}
	return ExitCode(results)
}

func run(contractPaths []string, factsPath, actionsPath string, opts Options) ([]Result, error) {
	cs, err := LoadContracts(contractPaths)
	if err != nil {
		return nil, err
	}
	facts, err := readFile(factsPath, ReadFacts)
	if err != nil {
		return nil, err
	}
	actions, err := readFile(actionsPath, ReadActions)
	if err != nil {
		return nil, err
	}
	if len(actions) == 0 {
		return nil, inputErr(actionsPath, 0, "no actions to check")
	}
	return Verify(cs, actionsPath, actions, facts, opts)
}

func writeJUnitFile(path string, results []Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	if err := WriteJUnit(f, results); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write junit %s: %w", path, err)
	}
	return nil
}
