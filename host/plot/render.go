package plot

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"math"

	"github.com/optlab/optlab/internal/atomicfile"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Size is the size of a PNG image.
type Size struct {
	// Width and Height are in inches; DPI is pixels per inch (96 when
	// zero).
	Width, Height float64
	DPI           int
}

// PanelSize returns the default size of a figure of n panels side by side.
func PanelSize(n int) Size {
	return Size{Width: 5.5 * float64(max(n, 1)), Height: 4, DPI: 110}
}

// Legend places a panel's legend inside its plotting area.
type Legend int

// Legend positions.
const (
	LegendTopRight Legend = iota
	LegendBottomRight
	LegendTopLeft
	LegendBottomLeft
	// LegendTopCenter suits U-shaped curves such as loss landscapes.
	LegendTopCenter
)

// Panel is one chart of lines.
type Panel struct {
	Title, XLabel, YLabel string
	Series                []Series
	Legend                Legend
}

// Lines draws panels side by side and writes them as a PNG file at path
// (replaced atomically). A zero size uses PanelSize(len(panels)).
func Lines(path string, panels []Panel, size Size) error {
	if len(panels) == 0 {
		return fmt.Errorf("plot %s: no panels", path)
	}
	if size.Width == 0 {
		size = PanelSize(len(panels))
	}
	plots := make([]*gplot.Plot, len(panels))
	for i, pn := range panels {
		p, err := linePlot(pn)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		plots[i] = p
	}
	return savePNG(path, size, func(dc draw.Canvas) {
		tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4,
			PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 3}
		cs := gplot.Align([][]*gplot.Plot{plots}, tiles, dc)
		for i, p := range plots {
			if panels[i].Legend == LegendTopCenter {
				c := cs[0][i]
				p.Legend.XOffs = -(c.Max.X - c.Min.X) / 3
			}
			p.Draw(cs[0][i])
		}
	})
}

// bandAlpha is the opacity of a series' band.
const bandAlpha = 0x40

// linePlot builds one panel.
func linePlot(pn Panel) (*gplot.Plot, error) {
	p := gplot.New()
	p.Title.Text = pn.Title
	p.X.Label.Text = pn.XLabel
	p.Y.Label.Text = pn.YLabel
	p.Add(plotter.NewGrid())
	switch pn.Legend {
	case LegendTopRight, LegendTopCenter:
		p.Legend.Top = true
	case LegendTopLeft:
		p.Legend.Top, p.Legend.Left = true, true
	case LegendBottomLeft:
		p.Legend.Left = true
	}
	for _, s := range pn.Series {
		if len(s.X) != len(s.Y) {
			return nil, fmt.Errorf("series %q: %d x values, %d y values", s.Label, len(s.X), len(s.Y))
		}
		col := seriesColor(s.Color)
		if len(s.Lo) == len(s.X) && len(s.Hi) == len(s.X) && len(s.X) > 1 {
			poly, err := plotter.NewPolygon(band(s))
			if err == nil {
				r, g, b, _ := col.RGBA()
				poly.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: bandAlpha}
				poly.LineStyle.Width = 0
				p.Add(poly)
			}
		}
		xys := finiteXYs(s.X, s.Y)
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", s.Label, err)
		}
		l.Color = col
		l.Width = vg.Points(1.6)
		if s.Dashed || s.Color >= paletteSize {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		if len(xys) == 1 {
			sc, err := plotter.NewScatter(xys)
			if err == nil {
				sc.Color = col
				p.Add(sc)
			}
		}
		if s.Label != "" {
			p.Legend.Add(s.Label, l)
		}
	}
	return p, nil
}

// finiteXYs keeps the points whose coordinates are finite.
func finiteXYs(x, y []float64) plotter.XYs {
	out := make(plotter.XYs, 0, len(x))
	for i := range x {
		if isFinite(x[i]) && isFinite(y[i]) {
			out = append(out, plotter.XY{X: x[i], Y: y[i]})
		}
	}
	return out
}

// band returns the outline of a series' band: Hi forwards, Lo backwards.
func band(s Series) plotter.XYs {
	var out plotter.XYs
	for i := range s.X {
		if isFinite(s.X[i]) && isFinite(s.Hi[i]) {
			out = append(out, plotter.XY{X: s.X[i], Y: s.Hi[i]})
		}
	}
	for i := len(s.X) - 1; i >= 0; i-- {
		if isFinite(s.X[i]) && isFinite(s.Lo[i]) {
			out = append(out, plotter.XY{X: s.X[i], Y: s.Lo[i]})
		}
	}
	return out
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Grid is a function sampled on a rectangular grid: Z[j][i] is the value
// at (X[i], Y[j]). X and Y are increasing.
type Grid struct {
	X, Y []float64
	Z    [][]float64
}

// check reports a grid whose sizes do not match.
func (g Grid) check() error {
	if len(g.X) == 0 || len(g.Y) == 0 {
		return errors.New("empty grid")
	}
	if len(g.Z) != len(g.Y) {
		return fmt.Errorf("grid has %d rows of values for %d y coordinates", len(g.Z), len(g.Y))
	}
	for j, row := range g.Z {
		if len(row) != len(g.X) {
			return fmt.Errorf("grid row %d has %d values for %d x coordinates", j, len(row), len(g.X))
		}
	}
	return nil
}

// gridXYZ adapts a Grid (with transformed values) to gonum's GridXYZ.
type gridXYZ struct {
	x, y []float64
	z    [][]float64
}

func (g gridXYZ) Dims() (c, r int)   { return len(g.x), len(g.y) }
func (g gridXYZ) Z(c, r int) float64 { return g.z[r][c] }
func (g gridXYZ) X(c int) float64    { return g.x[c] }
func (g gridXYZ) Y(r int) float64    { return g.y[r] }

// HeatPanel is one heat map.
type HeatPanel struct {
	Title, XLabel, YLabel string
	Grid                  Grid
}

// HeatOptions says how HeatMaps draws.
type HeatOptions struct {
	// Log colours by log10 of the values (values ≤ 0 are clamped to the
	// smallest positive one).
	Log bool
	// Contours is the number of contour lines, evenly spaced in the
	// (transformed) value range; 0 draws none.
	Contours int
	// Label names the colour bar's scale.
	Label string
	// Size of the image; zero uses PanelSize(len(panels)) widened for the
	// colour bar.
	Size Size
}

// HeatMaps draws heat maps side by side, with contour lines, one shared
// colour scale and a colour bar at the right, and writes them as a PNG
// file at path (replaced atomically). Non-finite values are drawn with the
// top colour of the scale.
func HeatMaps(path string, panels []HeatPanel, opts HeatOptions) error {
	if len(panels) == 0 {
		return fmt.Errorf("plot %s: no panels", path)
	}
	size := opts.Size
	if size.Width == 0 {
		size = PanelSize(len(panels))
		size.Width += 1.2
	}
	grids := make([]gridXYZ, len(panels))
	lo, hi := math.Inf(1), math.Inf(-1)
	minPos := math.Inf(1)
	for _, pn := range panels {
		if err := pn.Grid.check(); err != nil {
			return fmt.Errorf("plot %s: %s: %w", path, pn.Title, err)
		}
		for _, row := range pn.Grid.Z {
			for _, v := range row {
				if isFinite(v) && v > 0 {
					minPos = math.Min(minPos, v)
				}
			}
		}
	}
	transform := func(v float64) float64 {
		if !opts.Log {
			return v
		}
		if v <= 0 {
			v = minPos
		}
		return math.Log10(v)
	}
	for k, pn := range panels {
		g := gridXYZ{x: pn.Grid.X, y: pn.Grid.Y, z: make([][]float64, len(pn.Grid.Z))}
		for j, row := range pn.Grid.Z {
			g.z[j] = make([]float64, len(row))
			for i, v := range row {
				t := math.NaN()
				if isFinite(v) {
					t = transform(v)
				}
				g.z[j][i] = t
				if isFinite(t) {
					lo, hi = math.Min(lo, t), math.Max(hi, t)
				}
			}
		}
		grids[k] = g
	}
	if !isFinite(lo) {
		return fmt.Errorf("plot %s: no finite values", path)
	}
	if hi <= lo {
		hi = lo + 1
	}
	cmap := moreland.SmoothBlueRed()
	cmap.SetMin(lo)
	cmap.SetMax(hi)
	pal := cmap.Palette(255)
	top := pal.Colors()[len(pal.Colors())-1]
	plots := make([]*gplot.Plot, len(panels))
	for k, pn := range panels {
		g := grids[k]
		for _, row := range g.z {
			for i, v := range row {
				if math.IsNaN(v) {
					row[i] = hi
				}
			}
		}
		p := gplot.New()
		p.Title.Text = pn.Title
		p.X.Label.Text = pn.XLabel
		p.Y.Label.Text = pn.YLabel
		p.X.Padding, p.Y.Padding = 0, 0
		h := plotter.NewHeatMap(g, pal)
		h.Min, h.Max = lo, hi
		h.Overflow, h.NaN = top, top
		h.Rasterized = true
		p.Add(h)
		if opts.Contours > 0 {
			levels := make([]float64, opts.Contours)
			for i := range levels {
				levels[i] = lo + (hi-lo)*float64(i+1)/float64(opts.Contours+1)
			}
			c := plotter.NewContour(g, levels, nil)
			c.LineStyles = []draw.LineStyle{{Color: color.NRGBA{A: 110}, Width: vg.Points(0.7)}}
			p.Add(c)
		}
		plots[k] = p
	}
	bar := gplot.New()
	bar.Add(&plotter.ColorBar{ColorMap: cmap, Vertical: true})
	bar.HideX()
	bar.Y.Label.Text = opts.Label
	bar.Y.Padding = 0
	return savePNG(path, size, func(dc draw.Canvas) {
		barW := vg.Inch * 1.2
		main := draw.Crop(dc, 0, -barW, 0, 0)
		tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4,
			PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
		cs := gplot.Align([][]*gplot.Plot{plots}, tiles, main)
		for i, p := range plots {
			p.Draw(cs[0][i])
		}
		side := draw.Crop(dc, dc.Max.X-dc.Min.X-barW+vg.Millimeter*3, -vg.Millimeter*4, vg.Millimeter*14, -vg.Millimeter*10)
		bar.Draw(side)
	})
}

// savePNG renders a figure with draw and writes it to path via a temporary
// file and a rename.
func savePNG(path string, size Size, render func(draw.Canvas)) (err error) {
	dpi := size.DPI
	if dpi == 0 {
		dpi = 96
	}
	c := vgimg.NewWith(vgimg.UseWH(vg.Length(size.Width)*vg.Inch, vg.Length(size.Height)*vg.Inch), vgimg.UseDPI(dpi),
		vgimg.UseBackgroundColor(color.White))
	if err := renderSafely(render, draw.New(c)); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return fmt.Errorf("plot %s: encoding PNG: %w", path, err)
	}
	if err := atomicfile.Write(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// renderSafely turns a panic of the plotting library (it panics on some
// degenerate inputs) into an error.
func renderSafely(render func(draw.Canvas), dc draw.Canvas) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("drawing: %v", r)
		}
	}()
	render(dc)
	return nil
}

// paletteSize is the number of distinct line colours; series beyond it
// reuse them with dashed lines.
const paletteSize = 10

// seriesColor is the colour of series number i: ten colours that stay
// distinct from each other (the Tableau 10 palette).
func seriesColor(i int) color.Color {
	palette := [paletteSize]color.NRGBA{
		{0x4E, 0x79, 0xA7, 0xFF}, {0xF2, 0x8E, 0x2B, 0xFF}, {0xE1, 0x57, 0x59, 0xFF}, {0x76, 0xB7, 0xB2, 0xFF}, {0x59, 0xA1, 0x4F, 0xFF},
		{0xED, 0xC9, 0x48, 0xFF}, {0xB0, 0x7A, 0xA1, 0xFF}, {0xFF, 0x9D, 0xA7, 0xFF}, {0x9C, 0x75, 0x5F, 0xFF}, {0x4D, 0x4D, 0x4D, 0xFF},
	}
	return palette[((i%paletteSize)+paletteSize)%paletteSize]
}
