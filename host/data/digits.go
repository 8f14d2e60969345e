package data

import (
	"bytes"
	"compress/gzip"
	"fmt"

	embedded "github.com/optlab/optlab/data"
)

// UCIDigitsName is the Set name of the UCI handwritten digits.
const UCIDigitsName = "uci-digits"

// UCI digits normalization constants: the mean and (population) standard
// deviation of all 1,797×64 pixel values after scaling to [0,1]. They are
// fixed properties of the shipped file, checked by the tests.
const (
	uciDigitsMean = 0.30526
	uciDigitsStd  = 0.37605
)

// LoadUCIDigits parses the UCI "Optical Recognition of Handwritten Digits"
// set shipped inside the binary (see package github.com/optlab/optlab/data
// for its source and licence): 1,797 samples of 8×8 images with values
// 0..16, here scaled to [0,1] (divided by 16) with Shape [1,8,8], and 10
// classes. Mean and Std hold the dataset's single-channel statistics.
func LoadUCIDigits() (*Set, error) {
	zr, err := gzip.NewReader(bytes.NewReader(embedded.UCIDigitsCSVGZ()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", UCIDigitsName, err)
	}
	defer func() { _ = zr.Close() }()
	s, err := ReadCSV(zr, CSVOptions{Name: UCIDigitsName, Classes: 10, Shape: []int{1, 8, 8}, Scale: 1.0 / 16})
	if err != nil {
		return nil, err
	}
	s.Mean = []float32{uciDigitsMean}
	s.Std = []float32{uciDigitsStd}
	return s, nil
}

// UCIDigits returns the UCI handwritten digits (see LoadUCIDigits) split
// into Train and Test: a stratified split with round(testFraction × 1797)
// test samples, fixed by seed. Val is nil; use HoldOut on Train for one.
func UCIDigits(testFraction float64, seed int64) (Split, error) {
	s, err := LoadUCIDigits()
	if err != nil {
		return Split{}, err
	}
	return SplitSet(s, SplitOptions{TestFraction: testFraction, Stratified: true, Seed: seed})
}
