package main

import (
	"io"

	"github.com/commitlayer/commitlayer/check"
)

// checkCmd runs `commitlayer check` (see check.Main). The command switch in
// run wires it as:
//
//	case "check":
//		return checkCmd(args[1:], stdout, stderr)
func checkCmd(args []string, stdout, stderr io.Writer) int {
	return check.Main(args, stdout, stderr)
}
