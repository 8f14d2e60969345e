package data

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/optlab/optlab/host/internal/sysmem"
)

// CheckSize reports an error when a dataset of n samples of sampleSize
// float32 values each (plus an int32 label per sample) cannot be held in
// host memory. Loading a dataset and splitting it into parts copies it once,
// so twice its size must fit in the memory available now: MemAvailable of
// /proc/meminfo, lowered to the headroom of every cgroup v1 or v2 memory
// limit that holds the process (host/internal/sysmem), or 8 GiB when
// neither can be read. The arithmetic
// cannot overflow: any n and sampleSize give an answer, never a panic.
//
// The host calls it when it checks an experiment, so that an oversized
// synthetic dataset is refused before anything is allocated; Synthetic
// makes a check of its own.
func CheckSize(n, sampleSize int) error {
	if n < 0 || sampleSize <= 0 {
		return fmt.Errorf("%d samples of %d values: want n ≥ 0 and a positive sample size", n, sampleSize)
	}
	need := mulSat(2, setBytes(n, sampleSize))
	return fits(fmt.Sprintf("%d samples of %d values", n, sampleSize), need, "twice the data: loaded and split", availableMemory())
}

// setBytes returns the bytes of a float32 set of n samples of sampleSize
// values with one int32 label each, saturating at math.MaxUint64.
func setBytes(n, sampleSize int) uint64 {
	return mulSat(uint64(n), addSat(mulSat(uint64(sampleSize), 4), 4))
}

// fits returns an error when need bytes exceed limit. what names the data
// and why tells what need counts.
func fits(what string, need uint64, why string, limit uint64) error {
	if need <= limit {
		return nil
	}
	return fmt.Errorf("%s need %s of memory (%s), more than the %s available; use fewer samples or features",
		what, formatBytes(need), why, formatBytes(limit))
}

// mulSat returns a×b, or math.MaxUint64 when that overflows.
func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// addSat returns a+b, or math.MaxUint64 when that overflows.
func addSat(a, b uint64) uint64 {
	sum, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return sum
}

// formatBytes writes n in binary units, e.g. "1.5 GiB".
func formatBytes(n uint64) string { return sysmem.Format(n) }

// availableMemory returns the bytes this process can still allocate
// (sysmem: MemAvailable lowered to the headroom of every cgroup v1 or v2
// limit that holds the process).
func availableMemory() uint64 { return sysmem.Available() }
