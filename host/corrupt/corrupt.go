// Package corrupt computes corrupted copies of an image test set on the
// device, for measuring robustness to distribution shift the way
// CIFAR-10-C does (Hendrycks & Dietterich, ICLR 2019): families of
// corruptions (noise, blur, digital) at severities 1–5, made from the clean
// test set at evaluation time, so that nothing is downloaded and every
// image dataset (grayscale or colour) gets them.
//
// The definitions and the parameter of every severity follow the authors'
// make_cifar_c.py where CIFAR-10-C has the family (docs/METRICS.md lists
// them); rotate and translate are optlab's own. Like CIFAR-10-C's saved
// images, the result is quantised to uint8 by truncation (np.uint8). The
// random draws are counter-based (tensor.SplitMixUniform) or come from a
// seeded PCG stream on the host, so a corrupted set is a pure function of
// the clean set, the family, the severity and the seed, the same on every
// device.
package corrupt

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// Severities is the number of severities of every family (1..Severities).
const Severities = 5

// Family is one kind of corruption.
type Family struct {
	// Name is the family's name in files and records (gaussian_noise).
	Name string
	// Doc says what the family does, in one line.
	Doc string
	// Params are the parameters of each severity (index sev−1): one
	// number, or for defocus_blur the disk's radius and the aliasing blur.
	Params [Severities][]float64
}

// Param returns the parameters of severity sev (1..Severities).
func (f Family) Param(sev int) []float64 { return f.Params[sev-1] }

// ParamString writes the parameters of severity sev as the docs cite them.
func (f Family) ParamString(sev int) string {
	p := f.Param(sev)
	if f.Name == "defocus_blur" {
		return fmt.Sprintf("r=%v a=%v", p[0], p[1])
	}
	return fmt.Sprint(p[0])
}

// Families returns every family, in the order tables list them.
func Families() []Family {
	return []Family{
		// make_cifar_c.py's parameters (Hendrycks & Dietterich 2019).
		{Name: "gaussian_noise", Doc: "x + N(0, c²) per pixel", Params: each(0.04, 0.06, 0.08, 0.09, 0.10)},
		{Name: "shot_noise", Doc: "Poisson(c·x)/c per pixel", Params: each(500, 250, 100, 75, 50)},
		{Name: "impulse_noise", Doc: "salt and pepper: a fraction c of the pixel values set to 0 or 1", Params: each(0.01, 0.02, 0.03, 0.05, 0.07)},
		{Name: "speckle_noise", Doc: "x + x·N(0, c²) per pixel", Params: each(0.06, 0.1, 0.12, 0.16, 0.2)},
		{Name: "gaussian_blur", Doc: "Gaussian filter of standard deviation c pixels (edges repeated)", Params: each(0.4, 0.6, 0.7, 0.8, 1)},
		{Name: "defocus_blur", Doc: "disk kernel of radius r, its aliasing smoothed by a Gaussian of σ = a (edges mirrored)",
			Params: [Severities][]float64{{0.3, 0.4}, {0.4, 0.5}, {0.5, 0.6}, {1, 0.2}, {1.5, 0.1}}},
		{Name: "contrast", Doc: "(x − m)·c + m, m the image's mean per channel", Params: each(0.75, 0.5, 0.4, 0.3, 0.15)},
		{Name: "brightness", Doc: "HSV value + c (grayscale: x + c)", Params: each(0.05, 0.1, 0.15, 0.2, 0.3)},
		{Name: "pixelate", Doc: "box-filter resize to ⌊c·size⌋ and back (PIL's BOX)", Params: each(0.95, 0.9, 0.85, 0.75, 0.65)},
		{Name: "jpeg", Doc: "JPEG-like: 8×8 DCT quantised with the IJG tables at quality c (YCbCr without chroma subsampling for colour)", Params: each(80, 65, 58, 50, 40)},
		// optlab's own.
		{Name: "rotate", Doc: "rotation by ±c degrees (sign drawn per image), bilinear, zero fill", Params: each(5, 10, 15, 20, 25)},
		{Name: "translate", Doc: "shift by c pixels in a direction drawn per image, bilinear, zero fill", Params: each(1, 2, 3, 4, 5)},
	}
}

// each makes one-number parameters per severity.
func each(v ...float64) [Severities][]float64 {
	var out [Severities][]float64
	for i := range out {
		out[i] = []float64{v[i]}
	}
	return out
}

// Names returns the names of every family.
func Names() []string {
	var out []string
	for _, f := range Families() {
		out = append(out, f.Name)
	}
	return out
}

// Lookup returns the family of the given name.
func Lookup(name string) (Family, error) {
	for _, f := range Families() {
		if f.Name == name {
			return f, nil
		}
	}
	return Family{}, fmt.Errorf("unknown corruption %q (one of %s)", name, strings.Join(Names(), ", "))
}

// Seed derives the seed of one family and severity from a set's seed, so
// that families and severities draw independent noise.
func Seed(seed int64, family string, sev int) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", seed, family, sev)
	return int64(h.Sum64() >> 1)
}

// Select returns the families named (all of them for "all"), in the order
// of Families, or an error naming an unknown one.
func Select(names []string) ([]Family, error) {
	if slices.Contains(names, "all") {
		return Families(), nil
	}
	var out []Family
	for _, f := range Families() {
		if slices.Contains(names, f.Name) {
			out = append(out, f)
		}
	}
	for _, n := range names {
		if _, err := Lookup(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Markdown is the table of the families and their parameter at every
// severity that docs/METRICS.md shows (a test keeps the two equal).
func Markdown() string {
	var b strings.Builder
	b.WriteString("| family | what it does | 1 | 2 | 3 | 4 | 5 |\n|---|---|---|---|---|---|---|\n")
	for _, f := range Families() {
		fmt.Fprintf(&b, "| `%s` | %s |", f.Name, f.Doc)
		for sev := 1; sev <= Severities; sev++ {
			fmt.Fprintf(&b, " %s |", f.ParamString(sev))
		}
		b.WriteString("\n")
	}
	return b.String()
}
