package experiment

import (
	"testing"
)

func TestKeyLines(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want map[string]int
	}{
		{
			name: "tables and keys",
			src:  "a = 1\n\n[t]\nb = 2 # c = 3\n[t.u]\nc = \"x # y\"\n",
			want: map[string]int{"a": 1, "t": 3, "t.b": 4, "t.u": 5, "t.u.c": 6},
		},
		{
			name: "arrays of tables",
			src:  "[[m]]\nn = 1\n[m.p]\nr = 1\n[[m]]\nn = 2\n[m.p]\nr = 2\n",
			want: map[string]int{"m": 1, "m[0]": 1, "m[0].n": 2, "m[0].p": 3, "m[0].p.r": 4,
				"m[1]": 5, "m[1].n": 6, "m[1].p": 7, "m[1].p.r": 8},
		},
		{
			name: "nested arrays of tables",
			src:  "[[a]]\n[[a.b]]\nx = 1\n[[a.b]]\nx = 2\n[[a]]\n[[a.b]]\nx = 3\n",
			want: map[string]int{"a[0].b[0].x": 3, "a[0].b[1].x": 5, "a[1].b[0].x": 8},
		},
		{
			name: "dotted and quoted keys",
			src:  "a.\"b c\".d = 1\n'e.f' = 2\n[ x . \"y\" ]\nz=3\n\"q\\u0041\" = 4\n",
			want: map[string]int{"a": 1, `a."b c"`: 1, `a."b c".d`: 1, `"e.f"`: 2, "x.y": 3, "x.y.z": 4, "x.y.qA": 5},
		},
		{
			name: "multiline values",
			src:  "a = \"\"\"\nx = 1\n\"\"\"\nb = [\n  1, # c\n  2,\n]\nc = '''\ny\n'''\nd = 4\ne = \"\"\"q\"\"\"\"\nf = 5\n",
			want: map[string]int{"a": 1, "b": 4, "b[0]": 5, "b[1]": 6, "c": 8, "d": 11, "e": 12, "f": 13},
		},
		{
			name: "inline tables and arrays of them",
			src:  "t = { a = 1, b = { c = 2 } }\nm = [\n  { n = 1 },\n  { n = 2 },\n]\nu = {\n  v = 1,\n}\n",
			want: map[string]int{"t.a": 1, "t.b.c": 1, "m[0].n": 3, "m[1].n": 4, "u.v": 7},
		},
		{
			name: "escaped quotes and crlf",
			src:  "a = \"x\\\"y\"\r\nb = 'z'\r\n",
			want: map[string]int{"a": 1, "b": 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := keyLines(tc.src)
			for k, line := range tc.want {
				if got[k] != line {
					t.Errorf("line of %q = %d, want %d (all: %v)", k, got[k], line, got)
				}
			}
		})
	}
}

func TestKeyPathString(t *testing.T) {
	tests := []struct {
		path keyPath
		want string
	}{
		{keyPath{"train", "batch_size"}, "train.batch_size"},
		{keyPath{"method"}.index(2).child("params").child("rho"), "method[2].params.rho"},
		{keyPath{"a b", "c.d", ""}, `"a b"."c.d".""`},
	}
	for _, tc := range tests {
		if got := tc.path.String(); got != tc.want {
			t.Errorf("%q.String() = %q, want %q", []string(tc.path), got, tc.want)
		}
	}
}
