package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// WriteMNIST writes a small synthetic dataset in the canonical MNIST format
// (four gzip-compressed IDX files under their published names) into dir,
// created if needed, so that LoadMNIST(kind, dir) reads it back. kind is
// FashionMNIST or MNIST. The images are the first channel of WriteCIFAR's
// class-dependent stripe images, cropped to 28×28, so a small network
// learns them; the output depends only on the arguments. It is meant for
// tests and smoke runs.
func WriteMNIST(dir, kind string, nTrain, nTest int, seed int64) error {
	f, err := mnistFormatFor(kind)
	if err != nil {
		return fmt.Errorf("write mnist: %w", err)
	}
	if nTrain <= 0 || nTest <= 0 {
		return fmt.Errorf("write %s: want positive record counts, got %d training and %d test", kind, nTrain, nTest)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", kind, err)
	}
	cf, _ := cifarFormatFor(CIFAR10)
	p := newCIFARPainter(cf, seed)
	off := (cifarSide - mnistSide) / 2
	for k, n := range []int{nTrain, nTest} {
		img, lab := make([]byte, 0, n*mnistPixels), make([]byte, 0, n)
		rec := make([]byte, 0, cf.recordSize())
		for range n {
			rec = p.record(rec[:0])
			lab = append(lab, rec[0])
			for y := range mnistSide {
				row := 1 + (y+off)*cifarSide + off
				img = append(img, rec[row:row+mnistSide]...)
			}
		}
		for j, body := range [][]byte{img, lab} {
			dims := []int{n, mnistSide, mnistSide}
			if j == 1 {
				dims = dims[:1]
			}
			if err := writeIDXGz(filepath.Join(dir, f.files[2*k+j].name), dims, body); err != nil {
				return fmt.Errorf("write %s: %w", kind, err)
			}
		}
	}
	return nil
}

// EncodeIDX returns an unsigned-byte IDX file with the given dimensions and
// data (whose length must be their product).
func EncodeIDX(dims []int, body []byte) []byte {
	b := []byte{0, 0, 0x08, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	return append(b, body...)
}

func writeIDXGz(path string, dims []int, body []byte) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(EncodeIDX(dims, body)); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
