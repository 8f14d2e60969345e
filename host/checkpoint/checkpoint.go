// Package checkpoint reads and writes the safetensors format
// (https://github.com/huggingface/safetensors), the file format of optlab's
// checkpoints and of model.init_from. It is pure Go and knows nothing of
// torch: host/checkpoint/statedict converts between an engine's device
// vectors and the host-side Tensors of this package.
//
// A safetensors file is an 8-byte little-endian header size N, N bytes of
// JSON header, and the raw little-endian data of every tensor:
//
//	{"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
//
// data_offsets are relative to the start of the data (the byte after the
// header). Write sorts tensors by name, stores their data in that order and
// pads the header with spaces so that the data starts 8-byte aligned; the
// same tensors and metadata always give the same bytes.
package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/optlab/optlab/host/internal/regfile"
	"github.com/optlab/optlab/internal/atomicfile"
)

// DType is a safetensors element type name.
type DType string

// Element types this package reads and writes.
const (
	F32 DType = "F32" // float32: Tensor.F32
	F64 DType = "F64" // float64: Tensor.F64
	I64 DType = "I64" // int64: Tensor.I64
)

// MetadataKey is the header entry that holds the string-to-string metadata;
// no tensor may have this name.
const MetadataKey = "__metadata__"

// MaxHeaderSize bounds the JSON header Read accepts (as the reference
// implementation does), so a corrupt size cannot make it allocate gigabytes.
const MaxHeaderSize = 100_000_000

// Tensor is one named tensor in host memory. Exactly the slice that matches
// DType holds the values, row-major, with as many elements as the product of
// Shape (one for a scalar, whose Shape is empty).
type Tensor struct {
	Name  string
	DType DType
	Shape []int64
	F32   []float32
	F64   []float64
	I64   []int64
}

// NewF32 returns a float32 tensor over data (not copied).
func NewF32(name string, shape []int64, data []float32) Tensor {
	return Tensor{Name: name, DType: F32, Shape: shape, F32: data}
}

// NewF64 returns a float64 tensor over data (not copied).
func NewF64(name string, shape []int64, data []float64) Tensor {
	return Tensor{Name: name, DType: F64, Shape: shape, F64: data}
}

// NewI64 returns an int64 tensor over data (not copied).
func NewI64(name string, shape []int64, data []int64) Tensor {
	return Tensor{Name: name, DType: I64, Shape: shape, I64: data}
}

// Numel returns the number of elements Shape describes (1 for a scalar), or
// -1 when a dimension is negative or the product overflows int64.
func (t Tensor) Numel() int64 { return numel(t.Shape) }

// Len returns the number of values held in the slice of t's DType (-1 for an
// unknown DType).
func (t Tensor) Len() int {
	switch t.DType {
	case F32:
		return len(t.F32)
	case F64:
		return len(t.F64)
	case I64:
		return len(t.I64)
	}
	return -1
}

// Float32s returns t's values as float32: the F32 slice itself, or a
// converted copy of F64 or I64 values.
func (t Tensor) Float32s() ([]float32, error) {
	switch t.DType {
	case F32:
		return t.F32, nil
	case F64:
		out := make([]float32, len(t.F64))
		for i, v := range t.F64 {
			out[i] = float32(v)
		}
		return out, nil
	case I64:
		out := make([]float32, len(t.I64))
		for i, v := range t.I64 {
			out[i] = float32(v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("tensor %q: unsupported dtype %q", t.Name, t.DType)
}

// Validate checks that t can be written: a non-empty name other than
// MetadataKey, a supported DType, non-negative dimensions, and as many
// values as the shape has elements.
func (t Tensor) Validate() error {
	if t.Name == "" {
		return errors.New("tensor with an empty name")
	}
	if t.Name == MetadataKey {
		return fmt.Errorf("tensor name %q is reserved for metadata", t.Name)
	}
	if elemSize(t.DType) == 0 {
		return fmt.Errorf("tensor %q: unsupported dtype %q (supported: %s, %s, %s)", t.Name, t.DType, F32, F64, I64)
	}
	n := t.Numel()
	if n < 0 {
		return fmt.Errorf("tensor %q: invalid shape %v", t.Name, t.Shape)
	}
	if int64(t.Len()) != n {
		return fmt.Errorf("tensor %q: shape %v has %d elements but %d %s values were given", t.Name, t.Shape, n, t.Len(), t.DType)
	}
	return nil
}

// numel multiplies the dimensions, returning -1 for a negative dimension or
// an overflow.
func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		if d != 0 && n > math.MaxInt64/d {
			return -1
		}
		n *= d
	}
	return n
}

// elemSize returns the size in bytes of one element of dt, 0 when dt is not
// supported.
func elemSize(dt DType) int64 {
	switch dt {
	case F32:
		return 4
	case F64, I64:
		return 8
	}
	return 0
}

// entry is a tensor's header record.
type entry struct {
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// Encode returns the safetensors bytes of ts and meta (nil or empty meta
// writes no metadata entry). Names must be distinct.
func Encode(ts []Tensor, meta map[string]string) ([]byte, error) {
	var b bytes.Buffer
	if err := encode(&b, ts, meta); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write stores ts and meta at path atomically: the file is written to a
// temporary file in the same directory, synced, and renamed over path, so a
// reader sees the old file or the complete new one, never a partial write.
func Write(path string, ts []Tensor, meta map[string]string) error {
	if err := atomicfile.WriteFunc(path, 0o644, func(w io.Writer) error { return encode(w, ts, meta) }); err != nil {
		return fmt.Errorf("writing checkpoint %s: %w", path, err)
	}
	return nil
}

// encode writes the header and data of ts (sorted by name) to w.
func encode(w io.Writer, ts []Tensor, meta map[string]string) error {
	sorted := make([]Tensor, len(ts))
	copy(sorted, ts)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for i, t := range sorted {
		if err := t.Validate(); err != nil {
			return err
		}
		if i > 0 && sorted[i-1].Name == t.Name {
			return fmt.Errorf("tensor name %q appears twice", t.Name)
		}
	}
	hdr, err := header(sorted, meta)
	if err != nil {
		return err
	}
	var size [8]byte
	binary.LittleEndian.PutUint64(size[:], uint64(len(hdr)))
	if _, err := w.Write(size[:]); err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	buf := make([]byte, 0, 64<<10)
	for _, t := range sorted {
		if err := writeData(w, buf, t); err != nil {
			return err
		}
	}
	return nil
}

// header renders the JSON header of sorted tensors, padded with spaces so
// that 8 + its length is a multiple of 8.
func header(sorted []Tensor, meta map[string]string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	put := func(v any) error {
		if err := enc.Encode(v); err != nil {
			return err
		}
		b.Truncate(b.Len() - 1) // Encode's newline
		return nil
	}
	b.WriteByte('{')
	first := true
	if len(meta) > 0 {
		b.WriteString(`"` + MetadataKey + `":`)
		if err := put(meta); err != nil { // maps are encoded with sorted keys
			return nil, fmt.Errorf("encoding metadata: %w", err)
		}
		first = false
	}
	var off int64
	for _, t := range sorted {
		if !first {
			b.WriteByte(',')
		}
		first = false
		if err := put(t.Name); err != nil {
			return nil, fmt.Errorf("encoding tensor name %q: %w", t.Name, err)
		}
		b.WriteByte(':')
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		end := off + t.Numel()*elemSize(t.DType)
		if err := put(entry{DType: string(t.DType), Shape: shape, Offsets: []int64{off, end}}); err != nil {
			return nil, fmt.Errorf("encoding tensor %q: %w", t.Name, err)
		}
		off = end
	}
	b.WriteByte('}')
	for (8+b.Len())%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes(), nil
}

// writeData writes t's values little-endian, staging them in buf.
func writeData(w io.Writer, buf []byte, t Tensor) error {
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	room := cap(buf) - 8
	switch t.DType {
	case F32:
		for _, v := range t.F32 {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			if len(buf) > room {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	case F64:
		for _, v := range t.F64 {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
			if len(buf) > room {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	case I64:
		for _, v := range t.I64 {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
			if len(buf) > room {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// Read loads every tensor and the metadata of the safetensors file at path.
// The metadata map is empty (not nil) when the file has none. Truncated or
// malformed files give an error that names the file and the problem.
func Read(path string) (map[string]Tensor, map[string]string, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading checkpoint: %w", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("reading checkpoint: %w", err)
	}
	ts, meta, err := decode(f, st.Size())
	if err != nil {
		return nil, nil, fmt.Errorf("reading checkpoint %s: %w", path, err)
	}
	return ts, meta, nil
}

// Decode parses safetensors bytes (see Read).
func Decode(b []byte) (map[string]Tensor, map[string]string, error) {
	return decode(bytes.NewReader(b), int64(len(b)))
}

// ErrMalformed marks a file that is not valid safetensors (truncated, bad
// header, inconsistent offsets); errors.Is(err, ErrMalformed) tells it from
// an I/O error.
var ErrMalformed = errors.New("malformed safetensors file")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// decode parses a safetensors file of size bytes read through r.
func decode(r io.ReaderAt, size int64) (map[string]Tensor, map[string]string, error) {
	entries, order, meta, n, err := readHeader(r, size)
	if err != nil {
		return nil, nil, err
	}
	dataStart := 8 + int64(n)
	dataLen := size - dataStart
	if err := checkLayout(entries, order, dataLen); err != nil {
		return nil, nil, err
	}
	out := make(map[string]Tensor, len(entries))
	buf := make([]byte, 64<<10)
	for _, name := range order {
		e := entries[name]
		t, err := readTensor(r, dataStart, name, e, buf)
		if err != nil {
			return nil, nil, err
		}
		out[name] = t
	}
	return out, meta, nil
}

// readHeader reads and parses the header of a safetensors file of the given
// size; n is the header's length in bytes.
func readHeader(r io.ReaderAt, size int64) (map[string]entry, []string, map[string]string, uint64, error) {
	if size < 8 {
		return nil, nil, nil, 0, malformed("truncated: %d bytes, too short for the 8-byte header size", size)
	}
	var sz [8]byte
	if err := readFull(r, sz[:], 0); err != nil {
		return nil, nil, nil, 0, err
	}
	n := binary.LittleEndian.Uint64(sz[:])
	if n > MaxHeaderSize {
		return nil, nil, nil, 0, malformed("header size %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	}
	if int64(n) > size-8 {
		return nil, nil, nil, 0, malformed("truncated: the header size says %d bytes but only %d follow", n, size-8)
	}
	hdr := make([]byte, n)
	if err := readFull(r, hdr, 8); err != nil {
		return nil, nil, nil, 0, err
	}
	entries, order, meta, err := parseHeader(hdr)
	return entries, order, meta, n, err
}

// ReadMeta reads only the metadata of the safetensors file at path (its
// "__metadata__" strings), without the tensors.
func ReadMeta(path string) (map[string]string, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint: %w", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint: %w", err)
	}
	_, _, meta, _, err := readHeader(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint %s: %w", path, err)
	}
	return meta, nil
}

// parseHeader decodes the JSON header: the tensors' entries, their names in
// file order, and the metadata.
func parseHeader(hdr []byte) (map[string]entry, []string, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, nil, malformed("header is not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, nil, malformed("header is not a JSON object")
	}
	entries := map[string]entry{}
	var order []string
	meta := map[string]string{}
	seenMeta := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, nil, malformed("header is not JSON: %v", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, nil, nil, malformed("header is not JSON: key %v", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, nil, malformed("header is not JSON: entry %q: %v", name, err)
		}
		if name == MetadataKey {
			if seenMeta {
				return nil, nil, nil, malformed("%s appears twice", MetadataKey)
			}
			seenMeta = true
			if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
				return nil, nil, nil, malformed("%s must map strings to strings", MetadataKey)
			}
			continue
		}
		if _, dup := entries[name]; dup {
			return nil, nil, nil, malformed("tensor %q appears twice", name)
		}
		if name == "" {
			return nil, nil, nil, malformed("tensor with an empty name")
		}
		var e entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, nil, nil, malformed("tensor %q: bad entry %s: %v", name, clip(raw), err)
		}
		if e.DType == "" || e.Shape == nil || len(e.Offsets) != 2 {
			return nil, nil, nil, malformed("tensor %q: entry %s needs dtype, shape and data_offsets [begin, end]", name, clip(raw))
		}
		entries[name] = e
		order = append(order, name)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, nil, malformed("header is not JSON: %v", err)
	}
	if rest := bytes.TrimLeft(hdr[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, nil, nil, malformed("header has %d bytes of trailing garbage after the JSON object", len(rest))
	}
	return entries, order, meta, nil
}

// clip shortens raw JSON for an error message.
func clip(raw []byte) string {
	const limit = 120
	if len(raw) > limit {
		return string(raw[:limit]) + "…"
	}
	return string(raw)
}

// checkLayout validates dtypes, shapes and offsets before anything is
// allocated: every tensor's byte range matches its shape and lies in the
// data, and the ranges tile the data exactly (no gaps, no overlaps, nothing
// after the last one), as the reference implementation requires.
func checkLayout(entries map[string]entry, order []string, dataLen int64) error {
	for _, name := range order {
		e := entries[name]
		es := elemSize(DType(e.DType))
		if es == 0 {
			return fmt.Errorf("tensor %q: unsupported dtype %q (supported: %s, %s, %s)", name, e.DType, F32, F64, I64)
		}
		n := numel(e.Shape)
		if n < 0 || n > math.MaxInt64/es {
			return malformed("tensor %q: invalid shape %v", name, e.Shape)
		}
		b, end := e.Offsets[0], e.Offsets[1]
		if b < 0 || end < b {
			return malformed("tensor %q: invalid data_offsets [%d, %d]", name, b, end)
		}
		if end > dataLen {
			return malformed("truncated: tensor %q needs data bytes [%d, %d) but the file has only %d data bytes", name, b, end, dataLen)
		}
		if end-b != n*es {
			return malformed("tensor %q: data_offsets [%d, %d] hold %d bytes, but %s%v needs %d", name, b, end, end-b, e.DType, e.Shape, n*es)
		}
	}
	byOffset := slices.Clone(order)
	sort.SliceStable(byOffset, func(i, j int) bool {
		ei, ej := entries[byOffset[i]], entries[byOffset[j]]
		if ei.Offsets[0] != ej.Offsets[0] {
			return ei.Offsets[0] < ej.Offsets[0]
		}
		return ei.Offsets[1] < ej.Offsets[1]
	})
	var at int64
	for _, name := range byOffset {
		e := entries[name]
		if e.Offsets[0] != at {
			if e.Offsets[0] < at {
				return malformed("tensor %q: data_offsets [%d, %d] overlap another tensor's data", name, e.Offsets[0], e.Offsets[1])
			}
			return malformed("tensor %q: gap in the data before offset %d", name, e.Offsets[0])
		}
		at = e.Offsets[1]
	}
	if at != dataLen {
		return malformed("%d bytes after the last tensor's data", dataLen-at)
	}
	return nil
}

// readFull fills p from r at off; a short read is io.ErrUnexpectedEOF.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readTensor reads and converts one tensor's data, staging bytes in buf.
func readTensor(r io.ReaderAt, dataStart int64, name string, e entry, buf []byte) (Tensor, error) {
	n := numel(e.Shape)
	t := Tensor{Name: name, DType: DType(e.DType), Shape: e.Shape}
	es := elemSize(t.DType)
	switch t.DType {
	case F32:
		t.F32 = make([]float32, n)
	case F64:
		t.F64 = make([]float64, n)
	case I64:
		t.I64 = make([]int64, n)
	}
	per := int64(len(buf)) / es
	for i := int64(0); i < n; i += per {
		k := min(per, n-i)
		chunk := buf[:k*es]
		if err := readFull(r, chunk, dataStart+e.Offsets[0]+i*es); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return Tensor{}, malformed("truncated while reading tensor %q", name)
			}
			return Tensor{}, fmt.Errorf("reading tensor %q: %w", name, err)
		}
		switch t.DType {
		case F32:
			dst := t.F32[i : i+k]
			for j := range dst {
				dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(chunk[4*j:]))
			}
		case F64:
			dst := t.F64[i : i+k]
			for j := range dst {
				dst[j] = math.Float64frombits(binary.LittleEndian.Uint64(chunk[8*j:]))
			}
		case I64:
			dst := t.I64[i : i+k]
			for j := range dst {
				dst[j] = int64(binary.LittleEndian.Uint64(chunk[8*j:]))
			}
		}
	}
	return t, nil
}

// Names returns the names of ts, sorted.
func Names(ts map[string]Tensor) []string {
	out := make([]string, 0, len(ts))
	for k := range ts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ShapeString renders a shape as PyTorch prints it, e.g. [64, 3, 3, 3].
func ShapeString(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
