package check

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/commitlayer/commitlayer"
)

// WriteText prints each verdict with its findings (and what to do about
// each), then a summary line.
func WriteText(w io.Writer, results []Result) error {
	var b strings.Builder
	counts := map[commitlayer.Status]int{}
	mismatches := 0
	for _, r := range results {
		v := r.Verdict
		counts[v.Status]++
		prov := ""
		if v.Provisional {
			prov = " (provisional)"
		}
		name := ""
		if r.Name != "" {
			name = r.Name + ": "
		}
		fmt.Fprintf(&b, "%-7s %s%s %s on %s%s  outcome=%s policy=%s\n", v.Status, name, r.Action.Contract, r.Action.ID,
			r.Action.Subject, prov, v.Lenses.Outcome, v.Lenses.Policy)
		for _, f := range v.Findings {
			fmt.Fprintf(&b, "        - %s %s [%s]: %s (next: %s)\n", f.Code, f.Check, f.Lens, oneLine(f.Message), hintOf(f))
		}
		if len(v.UnavailableSources) > 0 {
			fmt.Fprintf(&b, "        unavailable sources: %s\n", strings.Join(v.UnavailableSources, ", "))
		}
		if v.ClaimContradicted {
			fmt.Fprintf(&b, "        the agent's claim %q is contradicted\n", r.Action.Claim.Status)
		}
		if r.Mismatch != "" {
			mismatches++
			fmt.Fprintf(&b, "        MISMATCH with the verdict recorded in the run: %s\n", r.Mismatch)
		}
	}
	fmt.Fprintf(&b, "%d %s: %d PASS, %d FAIL, %d UNKNOWN\n", len(results), plural(len(results), "action", "actions"),
		counts[commitlayer.StatusPass], counts[commitlayer.StatusFail], counts[commitlayer.StatusUnknown])
	if recorded(results) {
		fmt.Fprintf(&b, "%d of %d recorded verdicts reproduced, %d %s\n", len(results)-mismatches, len(results),
			mismatches, plural(mismatches, "mismatch", "mismatches"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// recorded reports whether the results are compared with recorded
// verdicts (they name their scenarios).
func recorded(results []Result) bool {
	for _, r := range results {
		if r.Name != "" {
			return true
		}
	}
	return false
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// JUnit XML, the shape CI systems read (Jenkins, GitLab, GitHub actions'
// reporters): one suite, one test case per action, a <failure> for FAIL and
// an <error> for UNKNOWN (neither passed nor failed: a source could not be
// read or nothing was seen).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes the results as JUnit XML: the suite is "commitlayer
// check", each case is named "<action id> <subject>" in class "<contract>".
func WriteJUnit(w io.Writer, results []Result) error {
	s := junitSuite{Name: "commitlayer check", Tests: len(results), Time: "0"}
	for _, r := range results {
		v := r.Verdict
		c := junitCase{Name: r.Action.ID + " " + string(r.Action.Subject), Classname: r.Action.Contract, Time: "0"}
		if r.Name != "" {
			c.Name = r.Name + " " + c.Name
		}
		var body strings.Builder
		for _, f := range v.Findings {
			fmt.Fprintf(&body, "%s %s [%s]: %s (next: %s)\n", f.Code, f.Check, f.Lens, oneLine(f.Message), hintOf(f))
		}
		if len(v.UnavailableSources) > 0 {
			fmt.Fprintf(&body, "unavailable sources: %s\n", strings.Join(v.UnavailableSources, ", "))
		}
		p := &junitProblem{Message: v.Summary(), Type: string(v.Status), Body: body.String()}
		switch {
		case r.Mismatch != "":
			p.Message = "the verdict differs from the one recorded in the run: " + r.Mismatch
			p.Type = "MISMATCH"
			c.Failure = p
			s.Failures++
		case v.Status == commitlayer.StatusFail:
			c.Failure = p
			s.Failures++
		case v.Status == commitlayer.StatusUnknown:
			c.Error = p
			s.Errors++
		default:
			c.SystemOut = v.Summary()
		}
		s.Cases = append(s.Cases, c)
	}
	doc := junitSuites{Name: "commitlayer", Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Suites: []junitSuite{s}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// hintOf is the finding's hint, or its code's default when it has none.
func hintOf(f commitlayer.Finding) commitlayer.Remedy {
	if f.Hint != "" {
		return f.Hint
	}
	return commitlayer.Hint(f.Code)
}
