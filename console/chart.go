package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// chart is a stacked bar chart of verdict counts per bucket, drawn as SVG
// on the server (no script).
type chart struct {
	Width, Height int
	Bars          []bar
	Ticks, YTicks []tick
	Summary       string
}

type bar struct {
	X, W  float64
	Segs  []seg
	Title string
}

type seg struct {
	Class string
	Y, H  float64
}

type tick struct {
	At    float64
	Label string
}

const (
	chartW, chartH = 960, 260
	plotL, plotR   = 48, 8
	plotT, plotB   = 10, 30
	maxXTicks      = 8
)

func buildChart(rows []commitlayer.StatsRow, since, until time.Time, bucket time.Duration) chart {
	n := max(int((until.Sub(since)+bucket-1)/bucket), 1)
	counts := make([]commitlayer.StatusCounts, n)
	var total commitlayer.StatusCounts
	for _, r := range rows {
		if i := int(r.Start.Sub(since) / bucket); i >= 0 && i < n {
			counts[i].Add(r.Counts)
			total.Add(r.Counts)
		}
	}
	ch := chart{Width: chartW, Height: chartH}
	ch.Summary = fmt.Sprintf("%d actions from %s to %s: %d PASS, %d FAIL, %d UNKNOWN, %d pending.",
		total.Total(), since.Format("2006-01-02 15:04Z"), until.Format("2006-01-02 15:04Z"), total.Pass, total.Fail, total.Unknown, total.Pending)
	ymax := 0
	for _, c := range counts {
		ymax = max(ymax, c.Total())
	}
	ymax = niceCeil(ymax)
	plotW, plotH := float64(chartW-plotL-plotR), float64(chartH-plotT-plotB)
	slot := plotW / float64(n)
	bw := max(slot*0.8, 1)
	for i, c := range counts {
		b := bar{X: round1(float64(plotL) + float64(i)*slot + (slot-bw)/2), W: round1(bw)}
		start := since.Add(time.Duration(i) * bucket)
		b.Title = fmt.Sprintf("%s: %d PASS, %d FAIL, %d UNKNOWN, %d pending", start.Format("Jan 2 15:04"), c.Pass, c.Fail, c.Unknown, c.Pending)
		y := float64(plotT) + plotH
		for _, s := range []struct {
			class string
			n     int
		}{{"pass", c.Pass}, {"unknown", c.Unknown}, {"fail", c.Fail}, {"pending", c.Pending}} {
			if s.n == 0 {
				continue
			}
			h := plotH * float64(s.n) / float64(ymax)
			y -= h
			b.Segs = append(b.Segs, seg{Class: s.class, Y: round1(y), H: round1(h)})
		}
		ch.Bars = append(ch.Bars, b)
	}
	every := max(1, (n+maxXTicks-1)/maxXTicks)
	layout := "15:04"
	if bucket >= 24*time.Hour {
		layout = "Jan 2"
	} else if until.Sub(since) > 24*time.Hour {
		layout = "Jan 2 15h"
	}
	for i := 0; i < n; i += every {
		ch.Ticks = append(ch.Ticks, tick{At: round1(float64(plotL) + float64(i)*slot + slot/2),
			Label: since.Add(time.Duration(i) * bucket).UTC().Format(layout)})
	}
	for _, v := range []int{0, ymax / 2, ymax} {
		ch.YTicks = append(ch.YTicks, tick{At: round1(float64(plotT) + plotH - plotH*float64(v)/float64(ymax)), Label: fmt.Sprint(v)})
	}
	return ch
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten (at least 2, so
// the middle tick is whole).
func niceCeil(n int) int {
	if n <= 2 {
		return 2
	}
	p := 1
	for p*10 < n {
		p *= 10
	}
	for _, m := range []int{1, 2, 5} {
		if m*p >= n {
			return m * p
		}
	}
	return 10 * p
}

func round1(f float64) float64 { return float64(int(f*10+0.5)) / 10 }

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"iso":         func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"statusClass": func(s any) string { return "status-" + strings.ToLower(fmt.Sprint(s)) },
	"join":        strings.Join,
}
