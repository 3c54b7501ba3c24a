// Command reporthtml renders a results file (latest.json's shape) as the
// self-contained HTML report.
//
//	go run ./sandbox/report/cmd/reporthtml -in sandbox/results/latest.json -out latest.html
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
)

func main() {
	in := flag.String("in", "sandbox/results/latest.json", "results file (latest.json's shape)")
	out := flag.String("out", "latest.html", "HTML file to write")
	ui := flag.String("temporal-ui", report.DefaultTemporalUI, "Temporal UI base URL for the workflow links")
	ns := flag.String("namespace", "default", "Temporal namespace")
	flag.Parse()
	if err := run(*in, *out, report.Options{TemporalUI: *ui, Namespace: *ns}); err != nil {
		fmt.Fprintln(os.Stderr, "reporthtml:", err)
		os.Exit(1)
	}
}

func run(in, out string, o report.Options) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	r, err := matrix.Decode(data)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	page, err := report.HTML(r, o)
	if err != nil {
		return err
	}
	return os.WriteFile(out, page, 0o644)
}
