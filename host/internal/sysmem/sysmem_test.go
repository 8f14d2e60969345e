package sysmem

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRead lays out /proc and /sys/fs/cgroup trees as v2, v1 and hybrid
// machines have them, and checks that every limit (the process's cgroup's
// and its ancestors') lowers what the process may use.
func TestRead(t *testing.T) {
	const meminfo = "MemTotal: 8388608 kB\nMemAvailable: 4194304 kB\n" // 8 GiB, 4 GiB
	tests := []struct {
		name          string
		files         map[string]string
		total, avail  uint64
		sourceContain string
	}{
		{"no cgroup", map[string]string{"proc/meminfo": meminfo}, 8 << 30, 4 << 30, "MemAvailable"},
		{"v2 limit", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/job\n",
			"sys/fs/cgroup/cgroup.controllers": "memory\n",
			"sys/fs/cgroup/job/memory.max":     "1073741824\n", "sys/fs/cgroup/job/memory.current": "268435456\n",
		}, 1 << 30, 768 << 20, "cgroup v2 limit of /sys/fs/cgroup/job"},
		{"v2 unlimited", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/job\n",
			"sys/fs/cgroup/cgroup.controllers": "memory\n",
			"sys/fs/cgroup/job/memory.max":     "max\n", "sys/fs/cgroup/job/memory.current": "268435456\n",
		}, 8 << 30, 4 << 30, "MemAvailable"},
		{"v2 parent's limit binds", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/slurm/job\n",
			"sys/fs/cgroup/cgroup.controllers": "memory\n",
			"sys/fs/cgroup/slurm/memory.max":   "2147483648\n", "sys/fs/cgroup/slurm/memory.current": "1610612736\n",
			"sys/fs/cgroup/slurm/job/memory.max": "max\n", "sys/fs/cgroup/slurm/job/memory.current": "1\n",
		}, 2 << 30, 512 << 20, "slurm"},
		{"v1 limit", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "5:memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1610612736\n",
			"sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": "536870912\n",
			"sys/fs/cgroup/memory/docker/abc/memory.stat":           "cache 1\ntotal_inactive_file 268435456\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.usage_in_bytes":            "536870912\n",
		}, 1536 << 20, 1280 << 20, "cgroup v1 limit of /sys/fs/cgroup/memory/docker/abc"},
		{"v1 joint controllers", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "5:memory,hugetlb:/j\n",
			"sys/fs/cgroup/memory/j/memory.limit_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/j/memory.usage_in_bytes": "0\n",
		}, 1 << 30, 1 << 30, "cgroup v1"},
		{"v1 namespaced: path absent, mount root is the cgroup", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "5:memory:/outer/ns\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/memory.usage_in_bytes": "1073741825\n",
		}, 1 << 30, 0, "cgroup v1"},
		{"hybrid: v2 at unified", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/\n0::/u\n",
			"sys/fs/cgroup/unified/u/memory.max": "1073741824\n", "sys/fs/cgroup/unified/u/memory.current": "0\n",
		}, 1 << 30, 1 << 30, "cgroup v2"},
		{"nothing readable", map[string]string{}, Fallback, Fallback, "fallback"},
		{"escaping path ignored", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/../x\n",
		}, 8 << 30, 4 << 30, "MemAvailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, text := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m := read(root)
			if m.Total != tc.total || m.Available != tc.avail || !strings.Contains(m.Source, tc.sourceContain) {
				t.Errorf("read = %+v; want total %d, available %d, source containing %q", m, tc.total, tc.avail, tc.sourceContain)
			}
		})
	}
}

func TestReadThisMachine(t *testing.T) {
	m := Read()
	if m.Available == 0 || m.Total == 0 || m.Available > m.Total {
		t.Errorf("Read() = %+v", m)
	}
}
