package results

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// ConfigDiff lists how a run's configuration now differs from the one a
// finished record was trained with, one "key: old → new" line per
// difference, sorted by key; nil means the same run. Values compare by their
// canonical encoding (HashConfig's), so 5, 5.0 and a JSON round trip are
// equal. A key the record lacks is not compared: records written by an
// older optlab carry fewer keys, and a key it added is not a change the
// user made. A key the record has and the new configuration lacks is a
// difference ("(unset)").
//
// Keys of OmittedAtDefault are the exception: a configuration has them only
// when they are not at their default, so that runs at the default keep the
// hash they had before the key existed; a side that lacks one has its
// default, and a difference is reported either way.
func ConfigDiff(old, now map[string]any) []string {
	var out []string
	for k, ov := range old {
		nv, ok := now[k]
		o := canonString(ov)
		if !ok {
			if d, known := OmittedAtDefault[k]; known {
				if n := canonString(d); n != o {
					out = append(out, fmt.Sprintf("%s: %s → %s", k, o, n))
				}
				continue
			}
			out = append(out, fmt.Sprintf("%s: %s → (unset)", k, o))
			continue
		}
		if n := canonString(nv); n != o {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, o, n))
		}
	}
	for k, nv := range now {
		d, known := OmittedAtDefault[k]
		if _, inOld := old[k]; !known || inOld {
			continue
		}
		if o, n := canonString(d), canonString(nv); n != o {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, o, n))
		}
	}
	sort.Strings(out)
	return out
}

// OmittedAtDefault lists the configuration keys that a run's configuration
// has only when they are not at their default, with the default: the
// settings added after records existed whose default is what every earlier
// run did. A run at the defaults then keeps its configuration hash, and a
// record that lacks such a key is one that had the default.
var OmittedAtDefault = map[string]any{
	"train.deterministic":   false,
	"train.cudnn_benchmark": false,
	"train.tf32":            false,
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
