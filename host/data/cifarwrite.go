package data

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// cifar10Names are the class names of CIFAR-10 in label order, as listed in
// batches.meta.txt of the published archive.
func cifar10Names() []string {
	return []string{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}
}

// WriteCIFAR writes a small synthetic dataset in exactly the published CIFAR
// binary format into dir (created if needed), so that LoadCIFAR(kind, dir)
// reads it back. kind is CIFAR10 or CIFAR100.
//
// For CIFAR10 it writes data_batch_1.bin … data_batch_5.bin with
// nTrainPerBatch records each, test_batch.bin with nTest records and
// batches.meta.txt with the real class names. For CIFAR100 it writes
// train.bin with 5 × nTrainPerBatch records (the same training size as
// CIFAR10) and test.bin with nTest records; coarse labels are fine/5.
//
// It also writes optlab-generated.txt, which marks the folder as generated
// data and lists the record count of every file. The readers (LoadCIFAR,
// Get) require the published record counts of a folder without it, so that
// a truncated download cut at a record boundary is not taken for a small
// dataset; in a folder with it they require the listed counts instead.
//
// The images are learnable: every class has its own colour and stripe
// pattern, blurred by per-pixel noise, so a small network separates the
// classes well above chance. The output depends only on the arguments (up
// to rare ±1 pixel differences across architectures that fuse multiply-adds).
// It is meant for tests and smoke runs.
func WriteCIFAR(dir, kind string, nTrainPerBatch, nTest int, seed int64) error {
	f, err := cifarFormatFor(kind)
	if err != nil {
		return fmt.Errorf("write cifar: %w", err)
	}
	if nTrainPerBatch <= 0 || nTest <= 0 {
		return fmt.Errorf("write %s: want positive record counts, got %d per training batch and %d test", kind, nTrainPerBatch, nTest)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", kind, err)
	}
	g := newCIFARPainter(f, seed)
	perFile := nTrainPerBatch * 5 / len(f.trainFiles)
	for _, name := range f.trainFiles {
		if err := g.writeFile(filepath.Join(dir, name), perFile); err != nil {
			return fmt.Errorf("write %s: %w", kind, err)
		}
	}
	if err := g.writeFile(filepath.Join(dir, f.testFile), nTest); err != nil {
		return fmt.Errorf("write %s: %w", kind, err)
	}
	if kind == CIFAR10 {
		names := strings.Join(cifar10Names(), "\n") + "\n\n"
		if err := os.WriteFile(filepath.Join(dir, f.namesFile), []byte(names), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", kind, err)
		}
	}
	// The marker comes last: a folder whose writing failed has none, and
	// the readers then expect the published counts and refuse it.
	counts := map[string]int{f.testFile: nTest}
	for _, name := range f.trainFiles {
		counts[name] = perFile
	}
	if err := os.WriteFile(filepath.Join(dir, generatedMarker), []byte(f.markerText(counts)), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", kind, err)
	}
	return nil
}

// Painter tables: the stripe phase is one of cifarPhases values and the
// noise is drawn from a table of cifarNoiseTable normal values, which keeps
// generation fast enough for full-size CIFAR files (a few nanoseconds per
// pixel).
const (
	cifarPhases     = 8
	cifarNoiseTable = 1 << 12
)

// cifarPainter draws class-dependent synthetic images.
type cifarPainter struct {
	f       *cifarFormat
	r       *rng
	color   [][3]float64 // per-class base colour offset
	pattern [][]float64  // per class and phase, a 32×32 stripe image
	noise   []float64    // standard normal values
}

func newCIFARPainter(f *cifarFormat, seed int64) *cifarPainter {
	r := newRNG(seed, streamSynthetic)
	p := &cifarPainter{f: f, r: r, noise: make([]float64, cifarNoiseTable)}
	for c := range f.classes {
		p.color = append(p.color, [3]float64{60 * r.norm(), 60 * r.norm(), 60 * r.norm()})
		angle := math.Pi * float64(c) / float64(f.classes)
		freq := 2 * math.Pi * (1 + float64(c%4)) / cifarSide
		fx, fy := freq*math.Cos(angle), freq*math.Sin(angle)
		for ph := range cifarPhases {
			phase := 2 * math.Pi * float64(ph) / cifarPhases
			img := make([]float64, cifarSide*cifarSide)
			for y := range cifarSide {
				for x := range cifarSide {
					img[y*cifarSide+x] = 50 * math.Sin(fx*float64(x)+fy*float64(y)+phase)
				}
			}
			p.pattern = append(p.pattern, img)
		}
	}
	for i := range p.noise {
		p.noise[i] = 25 * r.norm()
	}
	return p
}

// record appends one labelled record in the binary layout to buf.
func (p *cifarPainter) record(buf []byte) []byte {
	c := p.r.intN(p.f.classes)
	if p.f.coarseClasses > 0 {
		buf = append(buf, byte(c*p.f.coarseClasses/p.f.classes))
	}
	buf = append(buf, byte(c))
	pattern := p.pattern[c*cifarPhases+p.r.intN(cifarPhases)]
	for ch := range cifarChannels {
		base := 128 + p.color[c][ch]
		var bits uint64
		for k, v := range pattern {
			if k%5 == 0 {
				bits = p.r.next() // five 12-bit table indices
			}
			noise := p.noise[bits&(cifarNoiseTable-1)]
			bits >>= 12
			buf = append(buf, byte(min(max(math.Round(base+v+noise), 0), 255)))
		}
	}
	return buf
}

func (p *cifarPainter) writeFile(path string, n int) (err error) {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := file.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	w := bufio.NewWriter(file)
	buf := make([]byte, 0, p.f.recordSize())
	for range n {
		buf = p.record(buf[:0])
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return w.Flush()
}
