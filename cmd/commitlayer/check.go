package main

import (
	"io"

	"github.com/commitlayer/commitlayer/check"
)

// checkUsage is the line for the command list in usage.
const checkUsage = "  check      verify actions against facts and contracts from files, no server (CI): exit 0 PASS, 1 FAIL, 2 UNKNOWN, 3 bad input\n"

// checkCmd runs `commitlayer check` (see check.Main). The command switch in
// run wires it as:
//
//	case "check":
//		return checkCmd(args[1:], stdout, stderr)
func checkCmd(args []string, stdout, stderr io.Writer) int {
	return check.Main(args, stdout, stderr)
}
