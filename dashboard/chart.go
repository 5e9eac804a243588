package dashboard

import (
	"context"
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/a-h/templ"

	"github.com/gatehouse/gatehouse/broker/evidence"
)

// Chart draws decisions per day as stacked bars in server-rendered SVG
// (no script, no inline style: colours are presentation attributes, which
// the Content-Security-Policy allows). Bottom to top: allowed, allowed but
// strict would refuse, held, refused.
func Chart(days []evidence.Day) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		_, err := io.WriteString(w, chartSVG(days))
		return err
	})
}

// Chart colours; the legend in gatehouse.css uses the same.
const (
	colAllowed = "#2f7d4a"
	colWould   = "#d39b1c"
	colHeld    = "#5a6cc2"
	colRefused = "#b3261e"
)

func chartSVG(days []evidence.Day) string {
	const h, top, bottom, left = 180, 16, 28, 36
	bar, gap := 28, 14
	if len(days) > 40 {
		bar, gap = 8, 3
	}
	width := left + len(days)*(bar+gap) + gap
	if width < 320 {
		width = 320
	}
	maxN := 1
	for _, d := range days {
		if n := d.Allowed + d.Held + d.Refused; n > maxN {
			maxN = n
		}
	}
	plot := h - top - bottom
	var b strings.Builder
	// Drawn at its natural size (width and height), shrunk by CSS
	// (max-width: 100%) on narrow screens.
	fmt.Fprintf(&b, `<svg class="chart" data-testid="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="Decisions per day">`, width, h, width, h)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#d0d7de"/>`, left, h-bottom, width, h-bottom)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="end" fill="#57606a">%d</text>`, left-6, top+4, maxN)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="end" fill="#57606a">0</text>`, left-6, h-bottom)
	if len(days) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" fill="#57606a">no decisions</text>`, left+8, h/2)
	}
	every := 1 + len(days)/12
	for i, d := range days {
		x := left + gap + i*(bar+gap)
		y := h - bottom
		seg := func(n int, colour, label string) {
			if n == 0 {
				return
			}
			hh := n * plot / maxN
			if hh < 2 {
				hh = 2
			}
			y -= hh
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s: %d %s</title></rect>`,
				x, y, bar, hh, colour, d.Day.Format("2006-01-02"), n, label)
		}
		seg(d.Allowed-d.Would, colAllowed, "allowed")
		seg(d.Would, colWould, "allowed, strict would refuse")
		seg(d.Held, colHeld, "held")
		seg(d.Refused, colRefused, "refused")
		if i%every == 0 {
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" text-anchor="middle" fill="#57606a">%s</text>`,
				x+bar/2, h-bottom+14, html.EscapeString(d.Day.Format("Jan 2")))
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}
