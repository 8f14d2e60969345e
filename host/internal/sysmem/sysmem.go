// Package sysmem reads how much memory this process may use: the machine's
// memory (/proc/meminfo) lowered to the limits of the cgroups that hold the
// process, cgroup v2 (memory.max) and cgroup v1 (memory.limit_in_bytes)
// alike, every ancestor's limit included. Every memory check of the host
// (data sets, plugin allocations, programs) asks it, so that they agree.
package sysmem

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

// Fallback is the memory assumed when nothing can be read (no /proc): 8 GiB.
const Fallback = 8 << 30

// unlimited is the smallest cgroup v1 limit read as "no limit" (the kernel
// writes LONG_MAX rounded down to a page).
const unlimited = 1 << 62

// Memory is what this process may use, in bytes.
type Memory struct {
	// Total is the most the process may ever hold: MemTotal, or the
	// tightest cgroup limit when that is lower.
	Total uint64
	// Available is what it may still allocate now: MemAvailable, lowered
	// to the headroom of every cgroup limit (limit − usage, reclaimable
	// page cache not counted as used).
	Available uint64
	// Source names what set Available ("MemAvailable", "cgroup v1 limit of
	// /sys/fs/cgroup/memory/x", "fallback"), for messages.
	Source string
}

// Read returns the memory this process may use now.
func Read() Memory { return read("/") }

// Available returns Read().Available.
func Available() uint64 { return Read().Available }

// read is Read with the file system rooted at root (tests).
func read(root string) Memory {
	m := Memory{Total: math.MaxUint64, Available: math.MaxUint64}
	if f, err := os.Open(filepath.Join(root, "proc/meminfo")); err == nil {
		total, avail := parseMeminfo(f)
		_ = f.Close()
		if total > 0 {
			m.Total = total
		}
		if avail > 0 {
			m.Available, m.Source = avail, "MemAvailable"
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup")); err == nil {
		for _, g := range parseCgroups(string(b)) {
			for dir := range g.dirs(root) {
				limit, headroom, ok := g.limits(dir)
				if !ok {
					continue
				}
				m.Total = min(m.Total, limit)
				if headroom < m.Available {
					m.Available, m.Source = headroom, fmt.Sprintf("cgroup v%d limit of %s", g.version, strings.TrimPrefix(dir, filepath.Clean(root)))
				}
			}
		}
	}
	if m.Total == math.MaxUint64 {
		m.Total = Fallback
	}
	if m.Available == math.MaxUint64 {
		m.Available, m.Source = min(m.Total, Fallback), "fallback"
	}
	m.Available = min(m.Available, m.Total)
	return m
}

// parseMeminfo returns MemTotal and MemAvailable of a /proc/meminfo
// listing, in bytes; 0 for one it does not find.
func parseMeminfo(r io.Reader) (total, avail uint64) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, rest, found := strings.Cut(sc.Text(), ":")
		if !found || (key != "MemTotal" && key != "MemAvailable") {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && strings.EqualFold(fields[1], "kB") {
			v = mulSat(v, 1024)
		}
		if key == "MemTotal" {
			total = v
		} else {
			avail = v
		}
	}
	return total, avail
}

// cgroup is the memory cgroup of one hierarchy that holds the process.
type cgroup struct {
	version int
	path    string // as /proc/self/cgroup writes it, "/a/b"
}

// parseCgroups returns the memory cgroups of a /proc/self/cgroup listing:
// the v2 entry ("0::/path") and a v1 entry whose controllers include
// memory ("4:memory:/path").
func parseCgroups(s string) []cgroup {
	var out []cgroup
	for line := range strings.Lines(s) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") || strings.Contains(parts[2], "..") {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			out = append(out, cgroup{2, parts[2]})
		case containsWord(parts[1], "memory"):
			out = append(out, cgroup{1, parts[2]})
		}
	}
	return out
}

func containsWord(list, w string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == w {
			return true
		}
	}
	return false
}

// mount is where the hierarchy of g is mounted under root.
func (g cgroup) mount(root string) string {
	if g.version == 1 {
		return filepath.Join(root, "sys/fs/cgroup/memory")
	}
	if _, err := os.Stat(filepath.Join(root, "sys/fs/cgroup/cgroup.controllers")); err != nil {
		// a hybrid layout (v1 controllers, v2 at unified/)
		return filepath.Join(root, "sys/fs/cgroup/unified")
	}
	return filepath.Join(root, "sys/fs/cgroup")
}

// dirs yields the folder of g and of each of its ancestors up to the
// hierarchy's root (whose limits bind it too). In a cgroup namespace the
// path may not exist under the mount; the mount's root is then the
// process's own cgroup.
func (g cgroup) dirs(root string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		top := g.mount(root)
		dir := filepath.Join(top, g.path)
		if _, err := os.Stat(dir); err != nil {
			dir = top
		}
		for {
			if !yield(dir) || dir == top || !strings.HasPrefix(dir, top) {
				return
			}
			dir = filepath.Dir(dir)
		}
	}
}

// limits returns the limit of the cgroup folder dir and its headroom
// (limit − usage + reclaimable page cache); false when it has no limit or
// it cannot be read.
func (g cgroup) limits(dir string) (limit, headroom uint64, ok bool) {
	limitFile, usageFile, inactive := "memory.max", "memory.current", "inactive_file"
	if g.version == 1 {
		limitFile, usageFile, inactive = "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
	}
	limit, ok = readUint(filepath.Join(dir, limitFile))
	if !ok || limit >= unlimited {
		return 0, 0, false
	}
	used, ok := readUint(filepath.Join(dir, usageFile))
	if !ok {
		return 0, 0, false
	}
	if cache, ok := readStat(filepath.Join(dir, "memory.stat"), inactive); ok && cache <= used {
		used -= cache
	}
	if used >= limit {
		return limit, 0, true
	}
	return limit, limit - used, true
}

// readUint reads a file holding one unsigned integer; "max" and anything
// unreadable give false.
func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// readStat returns the value of key in a memory.stat file.
func readStat(path, key string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if v, found := strings.CutPrefix(strings.TrimSpace(line), key+" "); found {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// mulSat returns a×b, or math.MaxUint64 when that overflows.
func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// Format writes n in binary units, e.g. "1.5 GiB".
func Format(n uint64) string {
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
