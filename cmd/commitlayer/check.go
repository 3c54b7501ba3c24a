package main

import (
	"io"

	"github.com/commitlayer/commitlayer/check"
	"github.com/commitlayer/commitlayer/sandbox/recheck"
)

// checkCmd runs `commitlayer check`: files against contracts
// (check.Main), or with --results a sandbox run's re-check
// (recheck.Main).
func checkCmd(args []string, stdout, stderr io.Writer) int {
	if recheck.Asks(args) {
		return recheck.Main(args, stdout, stderr)
	}
	return check.Main(args, stdout, stderr)
}
