package contracts

import (
	"cmp"
	"fmt"
	"io"
	"os"
)

// Lint parses each file and prints one "file:line: field: reason" line per
// problem to w (a contract id defined twice included); it reports whether
// all were valid.
func Lint(w io.Writer, paths []string) (ok bool) {
	ok = true
	defined := map[string]string{} // contract id → first file
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(w, "%s: file: %v\n", path, unwrapPath(err))
			ok = false
			continue
		}
		c, err := Parse(src)
		if err != nil {
			ok = false
			for _, e := range Errors(err) {
				field := cmp.Or(e.Field, "contract")
				if e.Line > 0 {
					fmt.Fprintf(w, "%s:%d: %s: %s\n", path, e.Line, field, e.Reason)
				} else {
					fmt.Fprintf(w, "%s: %s: %s\n", path, field, e.Reason)
				}
			}
			continue
		}
		if first, dup := defined[c.ID()]; dup {
			fmt.Fprintf(w, "%s:%d: id: contract %s is also defined in %s\n", path, c.idLine, c.ID(), first)
			ok = false
			continue
		}
		defined[c.ID()] = path
	}
	return ok
}

// unwrapPath drops the *PathError wrapper, whose path is already printed.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
