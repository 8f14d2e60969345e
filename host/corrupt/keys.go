package corrupt

import (
	"fmt"
	"strings"
)

// The keys of a run's corrupted-test-set metrics in its record, for every
// metric M of the clean test set (acc, nll, ece, …):
//   - corr.<family>.<severity>.M: one family at one severity;
//   - corr.<family>.M: the family's mean over the severities evaluated;
//   - corr_M: the mean over every family and severity evaluated.
const (
	// Prefix starts the per-family keys.
	Prefix = "corr."
	// MeanPrefix starts the keys of the means over everything.
	MeanPrefix = "corr_"
)

// Key is the record key of metric m of family at severity sev.
func Key(family string, sev int, m string) string {
	return fmt.Sprintf("%s%s.%d.%s", Prefix, family, sev, m)
}

// FamilyKey is the record key of metric m of family, averaged over its
// severities.
func FamilyKey(family, m string) string { return Prefix + family + "." + m }

// MeanKey is the record key of metric m averaged over every family and
// severity.
func MeanKey(m string) string { return MeanPrefix + m }

// Result is what a model scored on one corrupted test set.
type Result struct {
	Family   string
	Severity int
	Metrics  map[string]float64
}

// Record returns the record keys of results (every family at every
// severity it has): each metric per family and severity, per family and
// over all. The means are over the results that have the metric.
func Record(results []Result) map[string]float64 {
	out := map[string]float64{}
	type acc struct {
		sum float64
		n   int
	}
	fam := map[string]*acc{}
	all := map[string]*acc{}
	add := func(m map[string]*acc, k string, v float64) {
		a := m[k]
		if a == nil {
			a = &acc{}
			m[k] = a
		}
		a.sum += v
		a.n++
	}
	for _, r := range results {
		for m, v := range r.Metrics {
			out[Key(r.Family, r.Severity, m)] = v
			add(fam, FamilyKey(r.Family, m), v)
			add(all, MeanKey(m), v)
		}
	}
	for _, m := range []map[string]*acc{fam, all} {
		for k, a := range m {
			out[k] = a.sum / float64(a.n)
		}
	}
	return out
}

// IsKey reports whether a record key is a corrupted-test-set metric.
func IsKey(k string) bool {
	return strings.HasPrefix(k, Prefix) || strings.HasPrefix(k, MeanPrefix)
}
