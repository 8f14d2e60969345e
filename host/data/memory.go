package data

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// fallbackMemory is the memory budget assumed when the memory available
// cannot be read (no /proc/meminfo): 8 GiB.
const fallbackMemory = 8 << 30

// CheckSize reports an error when a dataset of n samples of sampleSize
// float32 values each (plus an int32 label per sample) cannot be held in
// host memory. Loading a dataset and splitting it into parts copies it once,
// so twice its size must fit in the memory available now: MemAvailable of
// /proc/meminfo, lowered to the headroom of a cgroup v2 memory limit when
// the process has one, or 8 GiB when neither can be read. The arithmetic
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
func formatBytes(n uint64) string {
	if n == math.MaxUint64 {
		return "more than 16 EiB"
	}
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n)
	u := 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}

// availableMemory returns the bytes this process can still allocate: the
// smaller of MemAvailable and the headroom left by a cgroup v2 memory limit,
// or fallbackMemory when neither can be read.
func availableMemory() uint64 {
	avail, ok := uint64(0), false
	if f, err := os.Open("/proc/meminfo"); err == nil {
		avail, ok = parseMeminfo(f)
		_ = f.Close()
	}
	if dir, found := cgroupDir(); found {
		if headroom, cok := cgroupHeadroom(dir); cok && (!ok || headroom < avail) {
			avail, ok = headroom, true
		}
	}
	if !ok {
		return fallbackMemory
	}
	return avail
}

// parseMeminfo returns the MemAvailable value of a /proc/meminfo listing,
// in bytes.
func parseMeminfo(r io.Reader) (uint64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !found {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, false
		}
		v, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, false
		}
		unit := uint64(1)
		if len(fields) > 1 && strings.EqualFold(fields[1], "kB") {
			unit = 1024
		}
		return mulSat(v, unit), true
	}
	return 0, false
}

// cgroupDir returns the cgroup v2 folder of this process, from
// /proc/self/cgroup.
func cgroupDir() (string, bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	return parseCgroup(string(b))
}

// parseCgroup returns the folder of the cgroup v2 entry ("0::/path") of a
// /proc/self/cgroup listing.
func parseCgroup(s string) (string, bool) {
	for line := range strings.Lines(s) {
		if p, found := strings.CutPrefix(strings.TrimSpace(line), "0::"); found && strings.HasPrefix(p, "/") && !strings.Contains(p, "..") {
			return filepath.Join("/sys/fs/cgroup", p), true
		}
	}
	return "", false
}

// cgroupHeadroom returns memory.max minus memory.current of the cgroup v2
// folder dir, and false when there is no limit or it cannot be read.
func cgroupHeadroom(dir string) (uint64, bool) {
	limit, ok := readUintFile(filepath.Join(dir, "memory.max"))
	if !ok {
		return 0, false
	}
	used, ok := readUintFile(filepath.Join(dir, "memory.current"))
	if !ok {
		return 0, false
	}
	if used >= limit {
		return 0, true
	}
	return limit - used, true
}

// readUintFile reads a file holding one unsigned integer; "max" and
// anything unreadable give false.
func readUintFile(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}
