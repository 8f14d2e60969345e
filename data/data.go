// Package data holds the small datasets that are shipped inside the optlab
// binary, so that experiments on them need no download.
//
// Each dataset lives in its own folder next to this file together with a
// README.md giving its source, licence and citation. The bytes are exposed
// read-only through functions; parsing them is the job of package
// github.com/optlab/optlab/host/data.
package data

import _ "embed"

// The embedded files are strings so that they are immutable.
var (
	//go:embed uci-digits/digits.csv.gz
	uciDigitsCSVGZ string

	//go:embed uci-digits/README.md
	uciDigitsREADME string
)

// UCIDigitsCSVGZ returns a fresh copy of the gzip-compressed CSV of the UCI
// "Optical Recognition of Handwritten Digits" set (the 1,797-sample part that
// scikit-learn ships as load_digits): no header, one sample per line, 64
// integers 0..16 (an 8×8 image, row-major) followed by the class label 0..9.
func UCIDigitsCSVGZ() []byte {
	return []byte(uciDigitsCSVGZ)
}

// UCIDigitsREADME returns the attribution and format notes (Markdown) that
// accompany UCIDigitsCSVGZ. Show it wherever the data set is redistributed.
func UCIDigitsREADME() string {
	return uciDigitsREADME
}
