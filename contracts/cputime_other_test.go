//go:build !unix

package contracts_test

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
