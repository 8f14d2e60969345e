package table

import (
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/results"
)

// Configuration keys of the label noise a run was trained with (host/train
// records them only when label noise is on).
const (
	noiseRateKey = "data.label_noise.rate"
	noiseKindKey = "data.label_noise.kind"
)

// noClean is the label-noise value of a run trained on clean labels.
const noClean = "0"

// noiseValue returns the label-noise setting of a run, as the table shows
// it: its rate and kind ("0.2 symmetric"), or "0" when the run has no
// label noise (no rate recorded, or rate 0, whatever the kind).
func noiseValue(r *results.Record) string {
	rate, _ := r.Config[noiseRateKey].(float64)
	if rate == 0 {
		return noClean
	}
	out := strconv.FormatFloat(rate, 'g', -1, 64)
	if kind, _ := r.Config[noiseKindKey].(string); kind != "" {
		out += " " + kind
	}
	return out
}

// withoutNoise returns copies of recs whose Method and Setting no longer
// name the run's label-noise setting: a sweep of data.label_noise.rate
// labels its runs "SGD rate=0.2", and the table shows the rate in its own
// field (FieldNoise) instead, so that the runs of one method at different
// rates are rows of the same method, paired with the baseline at the same
// rate.
func withoutNoise(recs []results.Record) []results.Record {
	out := make([]results.Record, len(recs))
	for i, r := range recs {
		if r.Setting != "" && strings.HasSuffix(r.Method, r.Setting) {
			prefix := strings.TrimSuffix(r.Method, r.Setting)
			kept := keptSettings(&r)
			r.Method = strings.TrimSpace(prefix + kept)
			r.Setting = kept
		}
		out[i] = r
	}
	return out
}

// keptSettings returns r.Setting without its label-noise items: an item
// "name=value" whose name is the last elements of data.label_noise.rate or
// data.label_noise.kind ("rate", "label_noise.rate", …) and whose value is
// the run's configured one.
func keptSettings(r *results.Record) string {
	var kept []string
	for _, item := range strings.Split(r.Setting, " ") {
		if !isNoiseItem(r, item) {
			kept = append(kept, item)
		}
	}
	return strings.Join(kept, " ")
}

// isNoiseItem reports whether a setting item names the run's label noise.
func isNoiseItem(r *results.Record, item string) bool {
	name, value, ok := strings.Cut(item, "=")
	if !ok || name == "" {
		return false
	}
	names := func(key string) bool { return key == name || strings.HasSuffix(key, "."+name) }
	switch {
	case names(noiseRateKey):
		v, err := strconv.ParseFloat(value, 64)
		rate, _ := r.Config[noiseRateKey].(float64)
		return err == nil && v == rate
	case names(noiseKindKey):
		kind, _ := r.Config[noiseKindKey].(string)
		if uq, err := strconv.Unquote(value); err == nil {
			value = uq
		}
		return value == kind
	}
	return false
}
