package results

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/optlab/optlab/host/identity"
)

// ConfigDiff lists how a run's configuration now differs from the one a
// finished record was trained with, one "key: old → new" line per
// difference, sorted by key; nil means the same run. Values compare by their
// canonical encoding (HashConfig's), so 5, 5.0 and a JSON round trip are
// equal. A key the record lacks is not compared: records written by an
// older optlab carry fewer keys, and a key it added is not a change the
// user made. A key the record has and the new configuration lacks is a
// difference ("(unset)"). Keys of identity.Defaults are the exception: a
// missing one, on either side, stands for its default value. Both
// configurations must be of the same identity version (see
// Record.MigratedConfig).
func ConfigDiff(old, now map[string]any) []string {
	var out []string
	defaults := identity.Defaults()
	for k, ov := range old {
		nv, ok := now[k]
		if !ok {
			def, omitted := defaults[k]
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
	for k, def := range defaults {
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
