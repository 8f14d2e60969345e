package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/internal/regfile"
)

// npyMagic opens every NPY file (numpy.lib.format).
const npyMagic = "\x93NUMPY"

// maxNPYHeader bounds the header of an NPY file. NumPy writes a few dozen
// bytes for the arrays optlab reads (its own reader refuses more than
// 10,000 by default); the bound keeps a corrupt length from allocating.
const maxNPYHeader = 1 << 20

// maxNPYRank bounds the number of dimensions of an NPY array (NumPy's own
// limit is 64).
const maxNPYRank = 32

// NPYArray is an array read from an NPY file or an NPZ member: its element
// type, its shape and its elements.
type NPYArray struct {
	// DType is NumPy's name of the element type: uint8, int8, uint16,
	// int16, uint32, int32, uint64, int64, float32 or float64.
	DType string
	// Shape is the array's shape; () is a scalar.
	Shape []int
	// Data holds the elements in C (row-major) order, little-endian,
	// ItemSize bytes each.
	Data []byte
}

// npyType is an element type ReadNPY accepts.
type npyType struct {
	code  string // the descr without its byte order: "f4", "u1"
	name  string // NumPy's name
	size  int    // bytes per element
	float bool
}

// npyTypes returns the element types ReadNPY accepts.
func npyTypes() []npyType {
	return []npyType{
		{"u1", "uint8", 1, false}, {"i1", "int8", 1, false},
		{"u2", "uint16", 2, false}, {"i2", "int16", 2, false},
		{"u4", "uint32", 4, false}, {"i4", "int32", 4, false},
		{"u8", "uint64", 8, false}, {"i8", "int64", 8, false},
		{"f4", "float32", 4, true}, {"f8", "float64", 8, true},
	}
}

// npyTypeNamed returns the type of the given NumPy name.
func npyTypeNamed(name string) (npyType, bool) {
	for _, t := range npyTypes() {
		if t.name == name {
			return t, true
		}
	}
	return npyType{}, false
}

// Len returns the number of elements, the product of Shape.
func (a *NPYArray) Len() int {
	n := 1
	for _, d := range a.Shape {
		n *= d
	}
	return n
}

// ItemSize returns the bytes per element of a's DType (0 for an unknown
// one).
func (a *NPYArray) ItemSize() int {
	t, _ := npyTypeNamed(a.DType)
	return t.size
}

// IsFloat reports whether a's elements are floats.
func (a *NPYArray) IsFloat() bool {
	t, _ := npyTypeNamed(a.DType)
	return t.float
}

// IsInt reports whether a's elements are integers.
func (a *NPYArray) IsInt() bool {
	t, ok := npyTypeNamed(a.DType)
	return ok && !t.float
}

// Float returns element i as a float64 (exactly, for every type but the
// 64-bit integers above 2⁵³). It panics if i is out of range or DType is
// not one of NPYArray's.
func (a *NPYArray) Float(i int) float64 {
	switch a.DType {
	case "float32":
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*i:])))
	case "float64":
		return math.Float64frombits(binary.LittleEndian.Uint64(a.Data[8*i:]))
	case "uint64":
		return float64(binary.LittleEndian.Uint64(a.Data[8*i:]))
	}
	return float64(a.Int(i))
}

// Int returns element i of an integer array as an int64 (a uint64 above
// math.MaxInt64 comes back negative), and element i of a float array
// converted as Go converts a float64 to int64. It panics if i is out of
// range or DType is not one of NPYArray's.
func (a *NPYArray) Int(i int) int64 {
	switch a.DType {
	case "uint8":
		return int64(a.Data[i])
	case "int8":
		return int64(int8(a.Data[i]))
	case "uint16":
		return int64(binary.LittleEndian.Uint16(a.Data[2*i:]))
	case "int16":
		return int64(int16(binary.LittleEndian.Uint16(a.Data[2*i:])))
	case "uint32":
		return int64(binary.LittleEndian.Uint32(a.Data[4*i:]))
	case "int32":
		return int64(int32(binary.LittleEndian.Uint32(a.Data[4*i:])))
	case "uint64", "int64":
		return int64(binary.LittleEndian.Uint64(a.Data[8*i:]))
	case "float32", "float64":
		return int64(a.Float(i))
	}
	panic(fmt.Sprintf("NPYArray.Int: unknown dtype %q", a.DType))
}

// LoadNPY reads the NPY file at path (see ReadNPY); errors name the path.
func LoadNPY(path string) (*NPYArray, error) {
	a, _, err := loadNPY(path, false)
	return a, err
}

// loadNPYID is LoadNPY that also identifies the file as it was read
// (ContentID).
func loadNPYID(path string) (*NPYArray, string, error) { return loadNPY(path, true) }

func loadNPY(path string, identify bool) (*NPYArray, string, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	a, err := ReadNPY(f, st.Size())
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	id := ""
	if identify {
		if id, err = ContentID(f); err != nil {
			return nil, "", err
		}
	}
	return a, id, nil
}

// ReadNPY reads one array in NumPy's NPY format (versions 1.0, 2.0 and
// 3.0) from r, which must hold the array and nothing after it. size is the
// number of bytes r holds (the file's size): a header that declares more
// data than that is refused before anything is allocated for it.
//
// It reads C-order arrays of the little-endian integer and float types
// NPYArray lists ('<' byte order, or any for one-byte types); a
// Fortran-order array (unless its order is immaterial: at most one
// dimension above 1), a big-endian one, and any other type (structured,
// complex, bool, strings, objects) are refused, saying why.
func ReadNPY(r io.Reader, size int64) (*NPYArray, error) {
	return readNPY(r, size, size)
}

// readNPY is ReadNPY for a stream that holds at most limit bytes and whose
// data buffer starts at hint bytes and grows only as data arrives (an NPZ
// member, whose size is a claim of the archive until it is read).
func readNPY(r io.Reader, limit, hint int64) (*NPYArray, error) {
	var pre [10]byte
	n, err := io.ReadFull(r, pre[:8])
	if err != nil || string(pre[:6]) != npyMagic {
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, err
		}
		return nil, fmt.Errorf("not an NPY file: it does not start with %q (%d bytes read)", npyMagic, n)
	}
	major, minor := pre[6], pre[7]
	var hlen int64
	switch {
	case major == 1 && minor == 0:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, truncated("header length", err)
		}
		hlen = int64(binary.LittleEndian.Uint16(pre[8:10]))
	case (major == 2 || major == 3) && minor == 0:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, truncated("header length", err)
		}
		hlen = int64(binary.LittleEndian.Uint32(b[:]))
	default:
		return nil, fmt.Errorf("NPY format version %d.%d is not supported (want 1.0, 2.0 or 3.0)", major, minor)
	}
	preamble := int64(10)
	if major > 1 {
		preamble = 12
	}
	if hlen > maxNPYHeader || preamble+hlen > limit {
		return nil, fmt.Errorf("NPY header of %d bytes: the file holds %d bytes in all (and a header over %d bytes is refused)", hlen, limit, maxNPYHeader)
	}
	header := make([]byte, hlen)
	if _, err := io.ReadFull(r, header); err != nil {
		return nil, truncated("header", err)
	}
	a, t, err := parseNPYHeader(header)
	if err != nil {
		return nil, err
	}
	// The data size, checked against what the file can hold before any of
	// it is allocated.
	avail := limit - preamble - hlen
	count := int64(1)
	if slices.Contains(a.Shape, 0) {
		count = 0
	}
	for _, d := range a.Shape {
		if count != 0 && count > avail/int64(d) {
			count = avail + 1 // more than the file holds, without overflow
			break
		}
		count *= int64(d)
	}
	if count > avail/int64(t.size) {
		return nil, fmt.Errorf("the header declares shape %s of %s (%s), more data than the %d bytes the file holds after its header",
			shapeString(a.Shape), t.name, sizeOf(a.Shape, t.size), avail)
	}
	need := count * int64(t.size)
	// And against the memory this process may use (a sparse file or a
	// deflated NPZ member can declare more than the machine has): the
	// array as stored and as the float32 values a data set holds.
	if err := fits(fmt.Sprintf("an array of shape %s of %s", shapeString(a.Shape), t.name),
		addSat(uint64(need), mulSat(uint64(count), 4)), "as stored and as float32 values", availableMemory()); err != nil {
		return nil, err
	}
	data, err := readGrowing(r, need, hint-preamble-hlen)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("the data ends after %d of the %d bytes of shape %s of %s", len(data), need, shapeString(a.Shape), t.name)
		}
		return nil, err
	}
	// Nothing may follow the data (reading to the end also makes an NPZ
	// member check its CRC).
	var one [1]byte
	if k, err := io.ReadFull(r, one[:]); k > 0 {
		return nil, fmt.Errorf("bytes follow the %d bytes of data of shape %s of %s: the file is corrupt or holds more than one array", need, shapeString(a.Shape), t.name)
	} else if !errors.Is(err, io.EOF) {
		return nil, err
	}
	a.Data = data
	return a, nil
}

// readGrowing reads exactly n bytes from r. Its buffer starts at hint
// bytes (at least 64 KiB, at most n) and doubles only as data arrives, so
// a stream that ends early costs at most about twice what it delivered.
// When r ends early it returns what it read and io.ErrUnexpectedEOF.
func readGrowing(r io.Reader, n, hint int64) ([]byte, error) {
	buf := make([]byte, 0, min(n, max(hint, 64<<10)))
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, 2*int64(cap(buf))))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if errors.Is(err, io.EOF) {
			return buf, io.ErrUnexpectedEOF
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// truncated describes an NPY file that ends inside what.
func truncated(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("the NPY file ends inside its %s", what)
	}
	return err
}

// sizeOf writes the bytes of an array of the given shape and item size,
// saturating ("more than 2^63 bytes").
func sizeOf(shape []int, item int) string {
	n := uint64(item)
	for _, d := range shape {
		if n = mulSat(n, uint64(d)); n > 1<<63 {
			return "more than 2^63 bytes"
		}
	}
	return formatBytes(n)
}

// shapeString writes a shape as NumPy does: (3,), (2, 4), ().
func shapeString(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// parseNPYHeader parses the header dictionary of an NPY file, e.g.
// "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", into an
// array without data and its element type.
func parseNPYHeader(h []byte) (*NPYArray, npyType, error) {
	p := &pyParser{s: string(h)}
	d, err := p.dict()
	if err != nil {
		return nil, npyType{}, fmt.Errorf("malformed NPY header %q: %w", clip(string(h), 120), err)
	}
	for k := range d {
		if k != "descr" && k != "fortran_order" && k != "shape" {
			return nil, npyType{}, fmt.Errorf("NPY header has an unexpected key %q (want descr, fortran_order and shape)", k)
		}
	}
	descr, ok := d["descr"].(string)
	if !ok {
		if _, isList := d["descr"].([]any); isList {
			return nil, npyType{}, errors.New("the array has a structured dtype (a record of fields); save a plain numeric array")
		}
		return nil, npyType{}, fmt.Errorf("NPY header: descr is %s, want a string such as '<f4'", pyKind(d["descr"]))
	}
	fortran, ok := d["fortran_order"].(bool)
	if !ok {
		return nil, npyType{}, fmt.Errorf("NPY header: fortran_order is %s, want True or False", pyKind(d["fortran_order"]))
	}
	dims, ok := d["shape"].([]any)
	if !ok || !p.tuple["shape"] {
		return nil, npyType{}, fmt.Errorf("NPY header: shape is %s, want a tuple of integers", pyKind(d["shape"]))
	}
	if len(dims) > maxNPYRank {
		return nil, npyType{}, fmt.Errorf("NPY header: shape has %d dimensions, more than %d", len(dims), maxNPYRank)
	}
	shape := make([]int, len(dims))
	big := 0 // dimensions above 1
	for i, v := range dims {
		n, ok := v.(int64)
		if !ok {
			return nil, npyType{}, fmt.Errorf("NPY header: shape element %d is %s, want a non-negative integer", i, pyKind(v))
		}
		if n < 0 || n > 1<<53 {
			return nil, npyType{}, fmt.Errorf("NPY header: shape element %d is %d, want a non-negative integer below 2^53", i, n)
		}
		shape[i] = int(n)
		if n > 1 {
			big++
		}
	}
	t, err := npyDescr(descr)
	if err != nil {
		return nil, npyType{}, err
	}
	if fortran && big > 1 {
		return nil, npyType{}, fmt.Errorf("the array of shape %s is stored in Fortran (column-major) order; save it in C order: np.save(f, np.ascontiguousarray(a))", shapeString(shape))
	}
	return &NPYArray{DType: t.name, Shape: shape}, t, nil
}

// npyDescr returns the element type a descr string names.
func npyDescr(descr string) (npyType, error) {
	order, code := byte('='), descr
	if descr != "" && strings.IndexByte("<>|=", descr[0]) >= 0 {
		order, code = descr[0], descr[1:]
	}
	types := npyTypes()
	for _, t := range types {
		if t.code != code {
			continue
		}
		switch {
		case t.size == 1 || order == '<':
			return t, nil
		case order == '>':
			return npyType{}, fmt.Errorf("the array is big-endian (dtype %q); save it little-endian: a.astype(a.dtype.newbyteorder('<'))", descr)
		case order == '|':
			return npyType{}, fmt.Errorf("dtype %q: byte order '|' (not applicable) for a %d-byte type", descr, t.size)
		default:
			return npyType{}, fmt.Errorf("dtype %q has no explicit byte order; want '<' (little-endian), as np.save writes", descr)
		}
	}
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = t.name
	}
	return npyType{}, fmt.Errorf("dtype %q is not supported (want one of %s)", descr, strings.Join(names, ", "))
}

// clip shortens s to at most n bytes for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// pyKind describes a parsed header value for a message.
func pyKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "missing"
	case string:
		return strconv.Quote(v)
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case []any:
		return "a list"
	}
	return "unexpected"
}

// pyParser parses the Python literals an NPY header is made of: a dict
// with string keys whose values are strings, True, False, integers, and
// tuples or lists of those (a structured dtype's descr is a list of
// tuples). Nothing is evaluated.
type pyParser struct {
	s     string
	i     int
	tuple map[string]bool // top-level keys whose value is a tuple
}

func (p *pyParser) ws() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) eat(c byte) bool {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *pyParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

// dict parses the whole header: one dict, then only blanks.
func (p *pyParser) dict() (map[string]any, error) {
	p.tuple = map[string]bool{}
	if !p.eat('{') {
		return nil, p.errorf("want '{'")
	}
	d := map[string]any{}
	for !p.eat('}') {
		p.ws()
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := d[k]; dup {
			return nil, p.errorf("key %q twice", k)
		}
		if !p.eat(':') {
			return nil, p.errorf("want ':' after key %q", k)
		}
		p.ws()
		p.tuple[k] = p.i < len(p.s) && p.s[p.i] == '('
		v, err := p.value(0)
		if err != nil {
			return nil, err
		}
		d[k] = v
		if !p.eat(',') {
			if !p.eat('}') {
				return nil, p.errorf("want ',' or '}'")
			}
			break
		}
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, p.errorf("unexpected %q after the dictionary", clip(p.s[p.i:], 20))
	}
	return d, nil
}

// value parses a string, True, False, an integer, or a tuple or list
// (nested at most depth 8).
func (p *pyParser) value(depth int) (any, error) {
	p.ws()
	if p.i >= len(p.s) {
		return nil, p.errorf("the header ends where a value should be")
	}
	switch c := p.s[p.i]; {
	case c == '\'' || c == '"':
		return p.str()
	case c == '(' || c == '[':
		if depth >= 8 {
			return nil, p.errorf("values nested too deep")
		}
		end := byte(')')
		if c == '[' {
			end = ']'
		}
		p.i++
		list := []any{}
		for !p.eat(end) {
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			if !p.eat(',') {
				if !p.eat(end) {
					return nil, p.errorf("want ',' or %q", end)
				}
				break
			}
		}
		return list, nil
	case c == '-' || (c >= '0' && c <= '9'):
		j := p.i + 1
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		n, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
		if err != nil {
			return nil, p.errorf("integer %q out of range", p.s[p.i:j])
		}
		p.i = j
		if p.i < len(p.s) && (p.s[p.i] == 'L' || p.s[p.i] == 'l') { // Python 2's long
			p.i++
		}
		return n, nil
	case strings.HasPrefix(p.s[p.i:], "True"):
		p.i += 4
		return true, nil
	case strings.HasPrefix(p.s[p.i:], "False"):
		p.i += 5
		return false, nil
	}
	return nil, p.errorf("unexpected %q", clip(p.s[p.i:], 20))
}

// str parses a quoted string without escapes.
func (p *pyParser) str() (string, error) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", p.errorf("want a quoted string")
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", p.errorf("unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.IndexByte(v, '\\') >= 0 {
		return "", p.errorf("escapes in strings are not supported")
	}
	p.i += end + 2
	return v, nil
}
