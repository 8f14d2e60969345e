package results

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// OmittedDefaults are the configuration keys that a run's configuration
// holds only when their value is not the default given here (settings
// added after records existed, whose default is what every earlier run
// did), so that runs at the default keep the configuration and hash they
// had before the key existed. ConfigDiff compares a missing one, on either
// side, as its default: turning a setting on, or off again, is a
// difference.
var OmittedDefaults = map[string]any{
	"train.precision":       "fp32",
	"model.memory_format":   "contiguous",
	"train.deterministic":   false,
	"train.cudnn_benchmark": false,
	"train.tf32":            false,
	// [data.label_noise], recorded only when label noise is on.
	"data.label_noise.kind": "",
	"data.label_noise.rate": 0.0,
	"data.label_noise.seed": int64(0),
	"data.label_noise.map":  "",
	// eval.best_epoch and [eval.corruptions], recorded only when asked for.
	"eval.best_epoch":             "",
	"eval.corruptions.families":   "",
	"eval.corruptions.severities": "",
	"eval.corruptions.seed":       int64(0),
	// data.layout, recorded only for an npz dataset in NHWC.
	"data.layout": "nchw",
	// model.torchscript_init, recorded only when "reset".
	"model.torchscript_init": "file",
}

// ConfigDiff lists how a run's configuration now differs from the one a
// finished record was trained with, one "key: old → new" line per
// difference, sorted by key; nil means the same run. Values compare by their
// canonical encoding (HashConfig's), so 5, 5.0 and a JSON round trip are
// equal. A key the record lacks is not compared: records written by an
// older optlab carry fewer keys, and a key it added is not a change the
// user made. A key the record has and the new configuration lacks is a
// difference ("(unset)"). Keys of OmittedDefaults are the exception: a
// missing one, on either side, stands for its default value.
func ConfigDiff(old, now map[string]any) []string {
	var out []string
	for k, ov := range old {
		nv, ok := now[k]
		if !ok {
			def, omitted := OmittedDefaults[k]
			if !omitted {
				out = append(out, fmt.Sprintf("%s: %s → (unset)", k, canonString(ov)))
				continue
			}
			nv = def
		}
		if o, n := canonString(ov), canonString(nv); o != n {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, o, n))
		}
	}
	for k, def := range OmittedDefaults {
		nv, inNow := now[k]
		if _, inOld := old[k]; inOld || !inNow {
			continue
		}
		if d, n := canonString(def), canonString(nv); d != n {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, d, n))
		}
	}
	sort.Strings(out)
	return out
}

// SameConfig reports whether two recorded configurations describe the same
// run: one's keys are all in the other with equal values (the record with
// fewer keys was written by an older optlab, which recorded fewer
// settings).
func SameConfig(a, b map[string]any) bool {
	return ConfigDiff(a, b) == nil || ConfigDiff(b, a) == nil
}

func canonString(v any) string {
	var b strings.Builder
	canon(&b, reflect.ValueOf(v))
	return b.String()
}
