package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// A line plot written as SVG by hand (issue 29 item 3): the soak's memory over time needs a picture next to its
// table, and nothing more than polylines, axes and a legend, so no plotting dependency.

// plotLine is one series: x in minutes, y in MiB.
type plotLine struct {
	name, color string
	dashed      bool
	points      [][2]float64
}

const (
	plotW, plotH                 = 760, 380
	plotLeft, plotRight, plotTop = 64, 16, 36
	plotBottom                   = 44
	plotInnerW, plotInnerH       = plotW - plotLeft - plotRight, plotH - plotTop - plotBottom
	plotTicks                    = 6
	plotXLabel, plotYLabel       = "minutes into the soak", "MiB"
	plotFont                     = `font-family="sans-serif" font-size="12"`
)

// writePlot draws lines on common axes starting at 0, with title above.
func writePlot(w io.Writer, title string, lines []plotLine) error {
	var maxX, maxY float64
	for _, l := range lines {
		for _, p := range l.points {
			maxX, maxY = max(maxX, p[0]), max(maxY, p[1])
		}
	}
	xStep, yStep := niceStep(maxX), niceStep(maxY*1.05)
	xMax, yMax := xStep*math.Ceil(maxX/xStep), yStep*math.Ceil(maxY*1.05/yStep)
	x := func(v float64) float64 { return plotLeft + v/xMax*plotInnerW }
	y := func(v float64) float64 { return plotTop + plotInnerH - v/yMax*plotInnerH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" %s font-weight="bold">%s</text>`+"\n", plotLeft, plotFont, html.EscapeString(title))
	for v := 0.0; v <= xMax+xStep/2; v += xStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`, x(v), plotTop, x(v), plotTop+plotInnerH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" %s text-anchor="middle">%s</text>`+"\n", x(v), plotTop+plotInnerH+16, plotFont, tick(v))
	}
	for v := 0.0; v <= yMax+yStep/2; v += yStep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, plotLeft, y(v), plotLeft+plotInnerW, y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" %s text-anchor="end">%s</text>`+"\n", plotLeft-6, y(v)+4, plotFont, tick(v))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" %s text-anchor="middle">%s</text>`+"\n", plotLeft+plotInnerW/2, plotH-8, plotFont, plotXLabel)
	fmt.Fprintf(&b, `<text x="14" y="%d" %s text-anchor="middle" transform="rotate(-90 14 %d)">%s</text>`+"\n", plotTop+plotInnerH/2, plotFont, plotTop+plotInnerH/2, plotYLabel)
	for i, l := range lines {
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="5,3"`
		}
		b.WriteString(`<polyline fill="none" stroke-width="1.5" stroke="` + l.color + `"` + dash + ` points="`)
		for j, p := range l.points {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", x(p[0]), y(p[1]))
		}
		b.WriteString("\"/>\n")
		ly := plotTop + 14 + 16*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`, plotLeft+plotInnerW-220, ly-4, plotLeft+plotInnerW-196, ly-4, l.color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" %s>%s</text>`+"\n", plotLeft+plotInnerW-190, ly, plotFont, html.EscapeString(l.name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceStep is a tick step of 1, 2 or 5 times a power of ten giving about plotTicks ticks up to v.
func niceStep(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	raw := v / plotTicks
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func tick(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
