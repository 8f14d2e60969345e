package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

func TestUCIDigitsEmbedded(t *testing.T) {
	zr, err := gzip.NewReader(bytes.NewReader(UCIDigitsCSVGZ()))
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	sc := bufio.NewScanner(zr)
	lines := 0
	for sc.Scan() {
		if n := strings.Count(sc.Text(), ","); n != 64 {
			t.Fatalf("line %d: %d commas, want 64", lines+1, n)
		}
		lines++
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if lines != 1797 {
		t.Errorf("got %d lines, want 1797", lines)
	}
	if !strings.Contains(UCIDigitsREADME(), "Alpaydin") {
		t.Errorf("README lacks the attribution")
	}
}

func TestUCIDigitsCSVGZIsACopy(t *testing.T) {
	a := UCIDigitsCSVGZ()
	a[0] ^= 0xff
	if b := UCIDigitsCSVGZ(); b[0] == a[0] {
		t.Errorf("UCIDigitsCSVGZ returned shared storage")
	}
}
