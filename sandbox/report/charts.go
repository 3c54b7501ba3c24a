package report

import (
	"fmt"
	"math"

	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// chart is an inline SVG: shapes laid out here, drawn by the template
// (which escapes every text).
type chart struct {
	Title  string
	Width  float64
	Height float64
	Rects  []rect
	Texts  []text
	Lines  []line
	Legend []legend
	// Empty says why there is nothing to draw.
	Empty string
}

type rect struct {
	X, Y, W, H float64
	Class      string
	// Tip is shown on hover.
	Tip string
}

type text struct {
	X, Y   float64
	Anchor string
	Class  string
	Text   string
}

type line struct{ X1, Y1, X2, Y2 float64 }

type legend struct {
	Class, Text string
}

// seriesClass is the CSS class of the i-th series (CommitLayer is 0).
func seriesClass(i int) string { return fmt.Sprintf("s%d", min(i, 5)) }

// agreementChart is, per family, each evaluator's agreement with the
// oracle, as horizontal bars.
func agreementChart(c Comparison) chart {
	ch := chart{Title: "Agreement with the oracle, by failure family", Width: 760}
	if len(c.Families) == 0 {
		ch.Empty = "No scenario ran to the end."
		ch.Height = 40
		return ch
	}
	const left, plotW, barH, gap, top = 170.0, 440.0, 12.0, 10.0, 24.0
	n := len(c.Evaluators)
	groupH := float64(n)*barH + gap
	ch.Height = top + float64(len(c.Families))*groupH + 24
	for p := 0; p <= 100; p += 25 {
		x := left + plotW*float64(p)/100
		ch.Lines = append(ch.Lines, line{x, top - 6, x, ch.Height - 20})
		ch.Texts = append(ch.Texts, text{X: x, Y: ch.Height - 6, Anchor: "middle", Class: "axis", Text: fmt.Sprintf("%d%%", p)})
	}
	for fi, f := range c.Families {
		y0 := top + float64(fi)*groupH
		ch.Texts = append(ch.Texts, text{X: left - 8, Y: y0 + float64(n)*barH/2 + 4, Anchor: "end", Class: "label", Text: f.Family})
		for ei, cnt := range f.Agree {
			y := y0 + float64(ei)*barH
			w := plotW * cnt.Rate()
			ch.Rects = append(ch.Rects, rect{X: left, Y: y, W: w, H: barH - 2, Class: seriesClass(ei),
				Tip: fmt.Sprintf("%s, %s: %s agree", f.Family, c.Evaluators[ei].Name, cnt)})
			ch.Texts = append(ch.Texts, text{X: left + w + 4, Y: y + barH - 3, Anchor: "start", Class: "value", Text: cnt.String()})
		}
	}
	for i, e := range c.Evaluators {
		ch.Legend = append(ch.Legend, legend{Class: seriesClass(i), Text: e.Name})
	}
	return ch
}

// latencyChart is the distribution of verify latency (recording to final
// verdict) over the rows that ran to the end.
func latencyChart(rows []matrix.Row) chart {
	ch := chart{Title: "Verify latency (action recorded → final verdict)", Width: 760, Height: 240}
	var vals []float64
	minV, maxV := math.Inf(1), 0.0
	for _, r := range rows {
		if r.Error == "" && r.LatencyMS > 0 {
			vals = append(vals, r.LatencyMS)
			minV, maxV = min(minV, r.LatencyMS), max(maxV, r.LatencyMS)
		}
	}
	if len(vals) == 0 {
		ch.Empty = "No latency was measured."
		ch.Height = 40
		return ch
	}
	// About 20 bins of a round width, from a round value at or below the
	// fastest.
	step := niceStep((maxV - minV) / 20)
	from := math.Floor(minV/step) * step
	bins := int(math.Floor((maxV-from)/step)) + 1
	counts := make([]int, bins)
	for _, v := range vals {
		counts[min(int(math.Floor((v-from)/step)), bins-1)]++
	}
	top := 0
	for _, n := range counts {
		top = max(top, n)
	}
	const left, plotW, plotTop, plotH = 50.0, 680.0, 16.0, 180.0
	bw := plotW / float64(bins)
	base := plotTop + plotH
	for _, g := range gridSteps(top) {
		y := base - plotH*float64(g)/float64(top)
		ch.Lines = append(ch.Lines, line{left, y, left + plotW, y})
		ch.Texts = append(ch.Texts, text{X: left - 6, Y: y + 4, Anchor: "end", Class: "axis", Text: fmt.Sprint(g)})
	}
	every := max(1, bins/10)
	for i, n := range counts {
		x := left + float64(i)*bw
		h := plotH * float64(n) / float64(top)
		lo, hi := from+float64(i)*step, from+float64(i+1)*step
		ch.Rects = append(ch.Rects, rect{X: x + 1, Y: base - h, W: bw - 2, H: h, Class: "s0",
			Tip: fmt.Sprintf("%s–%s ms: %d scenarios", fmtMS(lo), fmtMS(hi), n)})
		if i%every == 0 {
			ch.Texts = append(ch.Texts, text{X: x, Y: base + 16, Anchor: "middle", Class: "axis", Text: fmtMS(lo)})
		}
	}
	ch.Texts = append(ch.Texts, text{X: left + plotW, Y: base + 16, Anchor: "middle", Class: "axis", Text: fmtMS(from+float64(bins)*step) + " ms"})
	ch.Lines = append(ch.Lines, line{left, base, left + plotW, base})
	return ch
}

// passKChart is, per workflow, the agent's pass^k and CommitLayer's
// consistency over k attempts.
func passKChart(ps []matrix.PassK) chart {
	ch := chart{Title: "pass^k per workflow", Width: 760, Height: 250}
	if len(ps) == 0 {
		ch.Empty = "The run did not repeat its scenarios."
		ch.Height = 40
		return ch
	}
	ch.Title = fmt.Sprintf("pass^%d per workflow", ps[0].K)
	const left, plotW, plotTop, plotH = 50.0, 680.0, 16.0, 180.0
	base := plotTop + plotH
	for p := 0; p <= 100; p += 25 {
		y := base - plotH*float64(p)/100
		ch.Lines = append(ch.Lines, line{left, y, left + plotW, y})
		ch.Texts = append(ch.Texts, text{X: left - 6, Y: y + 4, Anchor: "end", Class: "axis", Text: fmt.Sprintf("%d%%", p)})
	}
	gw := plotW / float64(len(ps))
	bw := min(28, gw/3)
	for i, p := range ps {
		x0 := left + float64(i)*gw + gw/2 - bw
		for j, s := range []struct {
			c     matrix.Count
			class string
			what  string
		}{{p.Agent, "s1", "agent pass^k"}, {p.CommitLayer, "s0", "CommitLayer consistent"}} {
			h := plotH * s.c.Rate()
			x := x0 + float64(j)*bw
			ch.Rects = append(ch.Rects, rect{X: x, Y: base - h, W: bw - 2, H: h, Class: s.class,
				Tip: fmt.Sprintf("%s, %s: %s", p.Process, s.what, s.c)})
			ch.Texts = append(ch.Texts, text{X: x + bw/2 - 1, Y: base - h - 4, Anchor: "middle", Class: "value", Text: s.c.String()})
		}
		ch.Texts = append(ch.Texts, text{X: x0 + bw, Y: base + 16, Anchor: "middle", Class: "label", Text: p.Process})
	}
	ch.Legend = []legend{{"s1", "agent: all k attempts truly succeeded"}, {"s0", "CommitLayer: same verdict, agreeing, in all k"}}
	return ch
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// gridSteps are up to 5 round values from 0 to top.
func gridSteps(top int) []int {
	step := int(niceStep(float64(top) / 4))
	var out []int
	for g := 0; g <= top; g += max(step, 1) {
		out = append(out, g)
	}
	return out
}

func fmtMS(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
