package results

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// HashConfig returns a stable hash of a run configuration: the first 16 hex
// digits of the SHA-256 of a canonical encoding of cfg.
//
// The encoding sorts map keys at every level and writes every number by its
// value, not its Go type, so int64(5), 5.0 and json.Number("5") hash alike
// and a configuration hashes the same before and after a JSON round trip.
// Floats use the shortest representation that round-trips; NaN and ±Inf
// are allowed. Values of other types are encoded with fmt's %v. A nil and
// an empty map hash alike.
func HashConfig(cfg map[string]any) string {
	var b strings.Builder
	canon(&b, reflect.ValueOf(cfg))
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// canon writes the canonical encoding of v.
func canon(b *strings.Builder, v reflect.Value) {
	if !v.IsValid() {
		b.WriteString("null")
		return
	}
	if n, ok := v.Interface().(json.Number); ok {
		writeNumber(b, string(n))
		return
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			b.WriteString("null")
			return
		}
		canon(b, v.Elem())
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		writeFloat(b, v.Float())
	case reflect.String:
		b.WriteString(strconv.Quote(v.String()))
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			b.WriteString("[]")
			return
		}
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			canon(b, v.Index(i))
		}
		b.WriteByte(']')
	case reflect.Map:
		keys := make([]string, 0, v.Len())
		vals := make(map[string]reflect.Value, v.Len())
		for it := v.MapRange(); it.Next(); {
			k := fmt.Sprint(it.Key().Interface())
			keys = append(keys, k)
			vals[k] = it.Value()
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			canon(b, vals[k])
		}
		b.WriteByte('}')
	default:
		b.WriteString(strconv.Quote(fmt.Sprintf("%v", v.Interface())))
	}
}

// writeFloat writes f so that integral values look like integers.
func writeFloat(b *strings.Builder, f float64) {
	switch {
	case math.IsNaN(f):
		b.WriteString("NaN")
	case math.IsInf(f, 1):
		b.WriteString("+Inf")
	case math.IsInf(f, -1):
		b.WriteString("-Inf")
	case f == math.Trunc(f) && math.Abs(f) < 1<<63:
		if f == 0 {
			f = 0 // fold -0 into 0
		}
		b.WriteString(strconv.FormatInt(int64(f), 10))
	default:
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	}
}

// writeNumber writes a JSON number literal by value.
func writeNumber(b *strings.Builder, s string) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		b.WriteString(strconv.FormatInt(i, 10))
		return
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		writeFloat(b, f)
		return
	}
	b.WriteString(strconv.Quote(s))
}
