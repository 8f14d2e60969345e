package hparams

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/optlab/optlab/sdk/optim"
)

// interval is a parsed range tag.
type interval struct {
	lo, hi         float64
	loOpen, hiOpen bool
	// loName, hiName name a bound the host knows ("batch"); "" for a number.
	loName, hiName string
}

// Bounds are the values of the named range bounds, by name: "batch" is the
// number of samples of a training step's batch (train.batch_size), which
// bounds a parameter that splits the batch, range:"[1,batch]". A host
// resolves them before Configure (CheckIn); Check and Apply, which do not
// know them, leave a named bound unchecked.
type Bounds map[string]float64

// boundNames are the names a range bound may take, with what they mean.
var boundNames = map[string]string{"batch": "the batch size"}

// parseBound parses one bound of a range: a number, or a name of boundNames.
func parseBound(s string, dst *float64, name *string) bool {
	if _, ok := boundNames[s]; ok {
		*name = s
		return true
	}
	var err error
	*dst, err = strconv.ParseFloat(s, 64)
	return err == nil
}

// resolve returns iv with its named bounds replaced by their values in b
// (a name b lacks stays unbounded).
func (iv interval) resolve(b Bounds) interval {
	if v, ok := b[iv.loName]; ok && iv.loName != "" {
		iv.lo = v
	}
	if v, ok := b[iv.hiName]; ok && iv.hiName != "" {
		iv.hi = v
	}
	return iv
}

// parseRange parses "[a,b]", "(a,b)", "[a,)" and the like; an empty bound is
// unbounded (and open); a bound may be a name of boundNames ("[1,batch]"),
// unbounded until resolved.
func parseRange(s string) (interval, error) {
	bad := fmt.Errorf("range %q: want an interval such as \"[0,1]\", \"(0,)\", \"[1,)\" or \"[1,batch]\"", s)
	if len(s) < 3 || !strings.ContainsRune("[(", rune(s[0])) || !strings.ContainsRune("])", rune(s[len(s)-1])) {
		return interval{}, bad
	}
	lo, hi, ok := strings.Cut(s[1:len(s)-1], ",")
	if !ok {
		return interval{}, bad
	}
	iv := interval{lo: math.Inf(-1), hi: math.Inf(1), loOpen: s[0] == '(', hiOpen: s[len(s)-1] == ')'}
	if lo = strings.TrimSpace(lo); lo != "" && !parseBound(lo, &iv.lo, &iv.loName) {
		return interval{}, bad
	}
	if hi = strings.TrimSpace(hi); hi != "" && !parseBound(hi, &iv.hi, &iv.hiName) {
		return interval{}, bad
	}
	if iv.loName != "" && iv.loName == iv.hiName || iv.lo > iv.hi {
		return interval{}, bad
	}
	return iv, nil
}

func (iv interval) contains(x float64) bool {
	switch {
	case math.IsNaN(x):
		return false
	case x < iv.lo || iv.loOpen && x == iv.lo:
		return false
	case x > iv.hi || iv.hiOpen && x == iv.hi:
		return false
	}
	return true
}

// want says in words what the interval admits: "≥ 0", "> 0 and ≤ 1".
func (iv interval) want() string {
	var parts []string
	if !math.IsInf(iv.lo, -1) {
		op := "≥"
		if iv.loOpen {
			op = ">"
		}
		parts = append(parts, op+" "+strconv.FormatFloat(iv.lo, 'g', -1, 64)+iv.named(iv.loName))
	}
	if !math.IsInf(iv.hi, 1) {
		op := "≤"
		if iv.hiOpen {
			op = "<"
		}
		parts = append(parts, op+" "+strconv.FormatFloat(iv.hi, 'g', -1, 64)+iv.named(iv.hiName))
	}
	return strings.Join(parts, " and ")
}

// named is ", the batch size" for a resolved named bound, else "".
func (interval) named(name string) string {
	if name == "" {
		return ""
	}
	return ", " + boundNames[name]
}

// checkConstraints validates a spec's enum and range against its type.
func checkConstraints(s optim.ParamSpec) error {
	if len(s.Enum) > 0 {
		if s.Type != optim.String {
			return errors.New("enum applies to string hyperparameters only")
		}
		for _, e := range s.Enum {
			if e == "" {
				return fmt.Errorf("enum %q has an empty value", strings.Join(s.Enum, "|"))
			}
		}
	}
	if s.Range != "" {
		if s.Type != optim.Float && s.Type != optim.Int {
			return errors.New("range applies to float and int hyperparameters only")
		}
		if _, err := parseRange(s.Range); err != nil {
			return err
		}
	}
	return nil
}

// Check reports whether v (in the canonical type of s.Type, as Convert
// returns it) satisfies s's enum and range: "adaptive_scope" = "some" gives
// `"some" is not one of "all", "weights"`, and rho = -1 with range "[0,)"
// gives "-1 is out of range [0,): want ≥ 0".
func Check(s optim.ParamSpec, v any) error { return CheckIn(s, v, nil) }

// CheckIn is Check with the named range bounds resolved by b: m = 100 with
// range "[1,batch]" and b["batch"] = 64 gives "100 is out of range
// [1,batch]: want ≥ 1 and ≤ 64, the batch size". A name b lacks is left
// unchecked.
func CheckIn(s optim.ParamSpec, v any, b Bounds) error {
	if err := checkConstraints(s); err != nil {
		return err
	}
	if len(s.Enum) > 0 {
		x, _ := v.(string)
		if !slices.Contains(s.Enum, x) {
			quoted := make([]string, len(s.Enum))
			for i, e := range s.Enum {
				quoted[i] = strconv.Quote(e)
			}
			return fmt.Errorf("%q is not one of %s", x, strings.Join(quoted, ", "))
		}
	}
	if s.Range != "" {
		iv, _ := parseRange(s.Range)
		iv = iv.resolve(b)
		var x float64
		switch n := v.(type) {
		case float64:
			x = n
		case int64:
			x = float64(n)
		}
		if !iv.contains(x) {
			return fmt.Errorf("%v is out of range %s: want %s", v, s.Range, iv.want())
		}
	}
	return nil
}
