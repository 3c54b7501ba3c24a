package check

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/commitlayer/commitlayer"
)

// WriteText prints each verdict with its findings, then a summary line.
func WriteText(w io.Writer, results []Result) error {
	var b strings.Builder
	counts := map[commitlayer.Status]int{}
	mismatches, named := 0, false // named: compared with the verdicts recorded in a run
	for _, r := range results {
		v := r.Verdict
		counts[v.Status]++
		named = named || r.Name != ""
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
		details(&b, v, "        ", "- ")
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
	if named {
		fmt.Fprintf(&b, "%d of %d recorded verdicts reproduced, %d %s\n", len(results)-mismatches, len(results),
			mismatches, plural(mismatches, "mismatch", "mismatches"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// details writes a verdict's findings with their hints and its unavailable sources.
func details(b *strings.Builder, v commitlayer.Verdict, indent, bullet string) {
	for _, f := range v.Findings {
		fmt.Fprintf(b, "%s%s%s %s [%s]: %s (next: %s)\n", indent, bullet, f.Code, f.Check, f.Lens,
			strings.Join(strings.Fields(f.Message), " "), cmp.Or(f.Hint, commitlayer.Hint(f.Code)))
	}
	if len(v.UnavailableSources) > 0 {
		fmt.Fprintf(b, "%sunavailable sources: %s\n", indent, strings.Join(v.UnavailableSources, ", "))
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// JUnit XML, the shape CI systems read: one suite, one test case per
// action, a <failure> for FAIL and an <error> for UNKNOWN (neither passed
// nor failed).
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
		details(&body, v, "", "")
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
