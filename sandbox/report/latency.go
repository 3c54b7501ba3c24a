package report

import (
	"fmt"
	"math"
	"slices"
)

// latencyStats returns the mean, the 99th percentile (nearest rank) and the
// max of ms; zeros when it is empty.
func latencyStats(ms []float64) (mean, p99, maxV float64) {
	if len(ms) == 0 {
		return 0, 0, 0
	}
	sorted := slices.Clone(ms)
	slices.Sort(sorted)
	var sum float64
	for _, v := range sorted {
		sum += v
	}
	rank := int(math.Ceil(0.99*float64(len(sorted)))) - 1
	return sum / float64(len(sorted)), sorted[max(rank, 0)], sorted[len(sorted)-1]
}

// latencyCell renders mean / p99 / max in milliseconds: whole ones from
// 10 ms, one decimal below.
func latencyCell(mean, p99, maxV float64) string {
	f := func(v float64) string {
		if v < 10 {
			return fmt.Sprintf("%.1f ms", v)
		}
		return fmt.Sprintf("%.0f ms", v)
	}
	return f(mean) + " / " + f(p99) + " / " + f(maxV)
}
