package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sample() []Tensor {
	return []Tensor{
		NewF32("layer1.0.conv1.weight", []int64{2, 2, 2, 2}, []float32{1, -2, 3.5, float32(math.Inf(1)), 0, -0, 1e-30, 7, 8, 9, 10, 11, 12, 13, 14, 15}),
		NewF64("b", []int64{3}, []float64{math.Pi, -1, math.MaxFloat64}),
		NewI64("bn.num_batches_tracked", []int64{}, []int64{42}),
		NewF32("empty", []int64{0, 4}, []float32{}),
		NewI64("z", []int64{2}, []int64{math.MinInt64, math.MaxInt64}),
	}
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		ts   []Tensor
		meta map[string]string
	}{
		{"sample with metadata", sample(), map[string]string{"format": "pt", "optlab.arch": "resnet10", "<html>&": "é"}},
		{"sample without metadata", sample(), nil},
		{"no tensors", nil, map[string]string{"k": "v"}},
		{"nothing", nil, nil},
		{"one scalar", []Tensor{NewF32("s", nil, []float32{2})}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.safetensors")
			if err := Write(path, tc.ts, tc.meta); err != nil {
				t.Fatal(err)
			}
			got, meta, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.ts) {
				t.Fatalf("read %d tensors, wrote %d", len(got), len(tc.ts))
			}
			for _, want := range tc.ts {
				g, ok := got[want.Name]
				if !ok {
					t.Fatalf("tensor %q missing", want.Name)
				}
				if want.Shape == nil {
					want.Shape = []int64{}
				}
				if !reflect.DeepEqual(g, want) {
					t.Errorf("tensor %q: got %+v, want %+v", want.Name, g, want)
				}
			}
			wantMeta := tc.meta
			if wantMeta == nil {
				wantMeta = map[string]string{}
			}
			if !reflect.DeepEqual(meta, wantMeta) {
				t.Errorf("metadata %v, want %v", meta, wantMeta)
			}
			// Deterministic: the same input in another order gives the
			// same bytes.
			b1, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rev := make([]Tensor, len(tc.ts))
			for i, x := range tc.ts {
				rev[len(rev)-1-i] = x
			}
			b2, err := Encode(rev, tc.meta)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b1, b2) {
				t.Error("encoding depends on the order of the tensors")
			}
			n := binary.LittleEndian.Uint64(b1)
			if (8+n)%8 != 0 {
				t.Errorf("data starts at %d, not 8-byte aligned", 8+n)
			}
		})
	}
}

// TestKnownBytes checks the exact layout against a file written by hand
// following the specification.
func TestKnownBytes(t *testing.T) {
	b, err := Encode([]Tensor{NewF32("w", []int64{2}, []float32{1, 2}), NewI64("a", nil, []int64{3})}, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	hdr := `{"__metadata__":{"format":"pt"},"a":{"dtype":"I64","shape":[],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`
	for (8+len(hdr))%8 != 0 {
		hdr += " "
	}
	want := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	want = append(want, hdr...)
	want = binary.LittleEndian.AppendUint64(want, 3)
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(1))
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(2))
	if !bytes.Equal(b, want) {
		t.Errorf("got\n%q\nwant\n%q", b, want)
	}
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name string
		ts   []Tensor
		want string
	}{
		{"duplicate", []Tensor{NewF32("a", nil, []float32{1}), NewF32("a", nil, []float32{2})}, "appears twice"},
		{"empty name", []Tensor{NewF32("", nil, []float32{1})}, "empty name"},
		{"reserved name", []Tensor{NewF32(MetadataKey, nil, []float32{1})}, "reserved"},
		{"short data", []Tensor{NewF32("a", []int64{2, 2}, []float32{1, 2, 3})}, "4 elements but 3"},
		{"wrong slice", []Tensor{{Name: "a", DType: F64, Shape: []int64{1}, F32: []float32{1}}}, "1 elements but 0"},
		{"bad dtype", []Tensor{{Name: "a", DType: "BF16", Shape: []int64{1}}}, "unsupported dtype"},
		{"negative dim", []Tensor{NewF32("a", []int64{-1}, nil)}, "invalid shape"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "x.safetensors")
			err := Write(path, tc.ts, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a failed write left %d files behind", len(entries))
			}
		})
	}
}

// TestWriteReplaces checks that Write replaces an existing file.
func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.safetensors")
	for _, v := range []float32{1, 2} {
		if err := Write(path, []Tensor{NewF32("v", nil, []float32{v})}, nil); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got["v"].F32[0] != 2 {
		t.Errorf("read %v, want 2", got["v"].F32)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the directory, want 1", len(entries))
	}
}

// file assembles a safetensors file from a header and data.
func file(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), data...)
}

func TestMalformed(t *testing.T) {
	good, err := Encode(sample(), map[string]string{"a": "b"})
	if err != nil {
		t.Fatal(err)
	}
	huge := binary.LittleEndian.AppendUint64(nil, 1<<62)
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"short size", []byte{1, 2, 3}, "too short"},
		{"huge header size", huge, "exceeds the limit"},
		{"header past end", file(`{}`, nil)[:9], "truncated"},
		{"truncated data", good[:len(good)-3], "truncated"},
		{"extra data", append(append([]byte{}, good...), 0), "after the last tensor"},
		{"not json", file(`{"a":`, nil), "not JSON"},
		{"not object", file(`[1,2]`, nil), "not a JSON object"},
		{"trailing garbage", file(`{} x`, nil), "trailing garbage"},
		{"bad metadata", file(`{"__metadata__":{"a":1}}`, nil), "strings to strings"},
		{"null metadata", file(`{"__metadata__":null}`, nil), "strings to strings"},
		{"missing offsets", file(`{"a":{"dtype":"F32","shape":[1]}}`, make([]byte, 4)), "needs dtype"},
		{"missing shape", file(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, make([]byte, 4)), "needs dtype"},
		{"bad dtype", file(`{"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), "unsupported dtype"},
		{"size mismatch", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)), "needs 8"},
		{"negative dim", file(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, make([]byte, 4)), "invalid shape"},
		{"overflowing shape", file(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, make([]byte, 4)), "invalid shape"},
		{"fractional dim", file(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, make([]byte, 4)), "bad entry"},
		{"reversed offsets", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}`, make([]byte, 4)), "invalid data_offsets"},
		{"past the data", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 4)), "truncated"},
		{"gap", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), "gap"},
		{"overlap", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), "overlap"},
		{"duplicate", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			// Through a file, the error also names the file.
			path := filepath.Join(t.TempDir(), "bad.safetensors")
			if err := os.WriteFile(path, tc.b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err = Read(path)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read error %v, want one naming %s and containing %q", err, path, tc.want)
			}
			if tc.want != "unsupported dtype" && !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v is not ErrMalformed", err)
			}
		})
	}
}

func TestReadMissingFile(t *testing.T) {
	_, _, err := Read(filepath.Join(t.TempDir(), "nope.safetensors"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error %v, want os.ErrNotExist", err)
	}
}

func TestFloat32s(t *testing.T) {
	tests := []struct {
		in   Tensor
		want []float32
	}{
		{NewF32("a", []int64{2}, []float32{1, 2}), []float32{1, 2}},
		{NewF64("a", []int64{2}, []float64{1.5, -2}), []float32{1.5, -2}},
		{NewI64("a", []int64{1}, []int64{7}), []float32{7}},
	}
	for _, tc := range tests {
		got, err := tc.in.Float32s()
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, %v; want %v", tc.in.DType, got, err, tc.want)
		}
	}
	if _, err := (Tensor{Name: "x", DType: "U8"}).Float32s(); err == nil {
		t.Error("unsupported dtype converted without error")
	}
}

func FuzzRead(f *testing.F) {
	for _, ts := range [][]Tensor{sample(), nil, {NewF32("x", []int64{1}, []float32{1})}} {
		b, err := Encode(ts, map[string]string{"m": "v"})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, meta, err := Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes must encode again and decode to the same.
		list := make([]Tensor, 0, len(ts))
		for _, name := range Names(ts) {
			list = append(list, ts[name])
		}
		enc, err := Encode(list, meta)
		if err != nil {
			t.Fatalf("re-encoding a decoded file: %v", err)
		}
		ts2, meta2, err := Decode(enc)
		if err != nil {
			t.Fatalf("decoding a re-encoded file: %v", err)
		}
		if len(ts2) != len(ts) || len(meta2) != len(meta) {
			t.Fatalf("round trip changed the file: %d→%d tensors, %d→%d metadata", len(ts), len(ts2), len(meta), len(meta2))
		}
	})
}
