package tensorboard

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestCRC32C(t *testing.T) {
	ascending, descending, zeros, ones := make([]byte, 32), make([]byte, 32), make([]byte, 32), bytes.Repeat([]byte{0xff}, 32)
	for i := range ascending {
		ascending[i], descending[i] = byte(i), byte(31-i)
	}
	// RFC 3720 (iSCSI), appendix B.4: a SCSI read command PDU.
	readPDU := []byte{
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
		0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	}
	cases := []struct {
		name string
		data []byte
		want uint32
	}{
		// RFC 3720, appendix B.4 (CRC32C examples).
		{"32 bytes of zeros", zeros, 0x8a9136aa},
		{"32 bytes of 0xff", ones, 0x62a8ab43},
		{"0..31 ascending", ascending, 0x46dd794e},
		{"31..0 descending", descending, 0x113fdb5c},
		{"iSCSI read PDU", readPDU, 0xd9963a56},
		// The catalogue check value of CRC-32C.
		{"123456789", []byte("123456789"), 0xe3069283},
		{"empty", nil, 0},
	}
	for _, c := range cases {
		if got := crc32c(c.data); got != c.want {
			t.Errorf("crc32c(%s) = %#08x, want %#08x", c.name, got, c.want)
		}
	}
}

// unmask inverts mask (tensorflow/tsl/lib/hash/crc32c.h, Unmask).
func unmask(m uint32) uint32 {
	rot := m - maskDelta
	return rot>>17 | rot<<15
}

func TestMask(t *testing.T) {
	cases := []struct{ crc, want uint32 }{
		{0, 0xa282ead8},
		{1, 0xa284ead8}, // 1 rotated right by 15 is 1<<17
		{0x8000, 0xa282ead9},
	}
	for _, c := range cases {
		if got := mask(c.crc); got != c.want {
			t.Errorf("mask(%#08x) = %#08x, want %#08x", c.crc, got, c.want)
		}
	}
	for _, crc := range []uint32{0, 1, 0x8000, 0xdeadbeef, 0xffffffff, 0x5d7f5d7f, 0x8a9136aa} {
		if m := mask(crc); m == crc || unmask(m) != crc {
			t.Errorf("mask(%#08x) = %#08x, unmasks to %#08x", crc, m, unmask(m))
		}
	}
}

// TestEncoding checks the bytes of a scalar event and its framing against
// bytes written out by hand from event.proto and summary.proto, so that the
// writer is not only checked by its own reader.
func TestEncoding(t *testing.T) {
	wall := time.Unix(1, 5e8) // 1.5 s = 0x3ff8000000000000
	got := scalarEvent(wall, 3, []Value{{"a", 0.5}})
	want := []byte{
		0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, // field 1 (wall_time), fixed64: 1.5
		0x10, 0x03, // field 2 (step), varint: 3
		0x2a, 10, // field 5 (summary), 10 bytes:
		0x0a, 8, //   Summary field 1 (value), 8 bytes:
		0x0a, 1, 'a', //     Value field 1 (tag): "a"
		0x15, 0, 0, 0, 0x3f, //     Value field 2 (simple_value), fixed32: 0.5
	}
	if !bytes.Equal(got, want) {
		t.Errorf("scalarEvent = % x\nwant           % x", got, want)
	}
	got = versionEvent(wall)
	want = append([]byte{0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x1a, 13}, "brain.Event:2"...)
	if !bytes.Equal(got, want) {
		t.Errorf("versionEvent = % x\nwant            % x", got, want)
	}

	got = sessionStartEvent(wall, 300)
	want2 := []byte{
		0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, // field 1 (wall_time), fixed64: 1.5
		0x10, 0xac, 0x02, // field 2 (step), varint: 300
		0x3a, 2, // field 7 (session_log), 2 bytes:
		0x08, 1, //   SessionLog field 1 (status), varint: START
	}
	if !bytes.Equal(got, want2) {
		t.Errorf("sessionStartEvent = % x\nwant                % x", got, want2)
	}

	rec := appendRecord(nil, want)
	if len(rec) != 8+4+len(want)+4 {
		t.Fatalf("record of %d bytes is %d long", len(want), len(rec))
	}
	if n := binary.LittleEndian.Uint64(rec); n != uint64(len(want)) {
		t.Errorf("length %d, want %d", n, len(want))
	}
	if got, w := binary.LittleEndian.Uint32(rec[8:]), mask(crc32c(rec[:8])); got != w {
		t.Errorf("length CRC %#08x, want %#08x", got, w)
	}
	if !bytes.Equal(rec[12:12+len(want)], want) {
		t.Errorf("record data % x", rec[12:12+len(want)])
	}
	if got, w := binary.LittleEndian.Uint32(rec[12+len(want):]), mask(crc32c(want)); got != w {
		t.Errorf("data CRC %#08x, want %#08x", got, w)
	}
}

// loggerFile is an event file written by tensorboard_logger (built on
// TensorFlow's generated protobuf code), from the test_serialization test of
// TeamHG-Memex/tensorboard_logger's tests/test_tensorboard_logger.py: a
// fixed wall time of 256.5 s, then v/1 = 1.5 at step 1 and v/22 = 16 at
// step 2.
const loggerFile = "\x18\x00\x00\x00\x00\x00\x00\x00\xa3\x7fK\"\t\x00\x00\x00\x00\x00\x08p@\x1a\rbrain.Event:2\xbc\x98!+" +
	"\x19\x00\x00\x00\x00\x00\x00\x00\x8b\xf1\x08(\t\x00\x00\x00\x00\x00\x08p@\x10\x01*\x0c\n\n\n\x03v/1\x15\x00\x00\xc0?,\xec\xc0\x87" +
	"\x1a\x00\x00\x00\x00\x00\x00\x00\x12\x9b\xd8-\t\x00\x00\x00\x00\x00\x08p@\x10\x02*\r\n\x0b\n\x04v/22\x15\x00\x00\x80A\x8f\xa3\xb6\x88"

// TestOtherWriter checks the encoding and the reader against bytes another
// implementation wrote.
func TestOtherWriter(t *testing.T) {
	wall := time.Unix(256, 5e8)
	got := appendRecord(nil, versionEvent(wall))
	got = appendRecord(got, scalarEvent(wall, 1, []Value{{"v/1", 1.5}}))
	got = appendRecord(got, scalarEvent(wall, 2, []Value{{"v/22", 16}}))
	if string(got) != loggerFile {
		t.Errorf("wrote\n%q\nwant\n%q", got, loggerFile)
	}

	p := filepath.Join(t.TempDir(), "events.out.tfevents.0.logger")
	if err := os.WriteFile(p, []byte(loggerFile), 0o644); err != nil {
		t.Fatal(err)
	}
	evs, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{WallTime: 256.5, FileVersion: "brain.Event:2"},
		{WallTime: 256.5, Step: 1, Values: []Value{{"v/1", 1.5}}},
		{WallTime: 256.5, Step: 2, Values: []Value{{"v/22", 16}}},
	}
	if fmt.Sprint(evs) != fmt.Sprint(want) {
		t.Errorf("read %+v\nwant %+v", evs, want)
	}
}

func TestWriteRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tb", "run")
	before := float64(time.Now().Unix())
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^events\.out\.tfevents\.\d{10}\.[^/]+$`).MatchString(filepath.Base(w.Path())) {
		t.Errorf("file name %q is not TensorBoard's", filepath.Base(w.Path()))
	}
	steps := []struct {
		step   int64
		values []Value
	}{
		{10, []Value{{"train/loss", 2.25}}},
		{20, []Value{{"train/loss", 1.5}}},
		{1, []Value{{"train/loss", 1.75}, {"test/acc", 0.375}, {"lr", 0.0625}, {"method/loss_perturbed", -3}}},
		{1 << 40, []Value{{"big/step", 1e-3}}},
	}
	if err := w.SessionStart(7); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps[:2] {
		if err := w.Scalars(s.step, s.values...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if evs, err := ReadFile(w.Path()); err != nil || len(evs) != 4 {
		t.Fatalf("after Flush: %d events, %v; want 4", len(evs), err)
	}
	if err := w.Scalars(steps[2].step, steps[2].values...); err != nil {
		t.Fatal(err)
	}
	if err := w.Scalar(steps[3].step, steps[3].values[0].Tag, steps[3].values[0].Value); err != nil {
		t.Fatal(err)
	}
	if err := w.Scalars(99); err != nil { // no values: no event
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	after := float64(time.Now().Unix() + 1)

	evs, err := ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2+len(steps) {
		t.Fatalf("%d events, want %d: %+v", len(evs), 2+len(steps), evs)
	}
	if evs[0].FileVersion != FileVersion || evs[0].Values != nil || evs[0].SessionStart {
		t.Errorf("first event %+v, want file_version %q only", evs[0], FileVersion)
	}
	if !evs[1].SessionStart || evs[1].Step != 7 || evs[1].Values != nil {
		t.Errorf("second event %+v, want a session start at step 7", evs[1])
	}
	for i, ev := range evs {
		if ev.WallTime < before || ev.WallTime > after {
			t.Errorf("event %d: wall time %v not in [%v, %v]", i, ev.WallTime, before, after)
		}
	}
	for i, s := range steps {
		ev := evs[i+2]
		if ev.Step != s.step || ev.FileVersion != "" || ev.SessionStart || len(ev.Values) != len(s.values) {
			t.Errorf("event %d = %+v, want step %d, values %v", i+2, ev, s.step, s.values)
			continue
		}
		for j, v := range s.values {
			if ev.Values[j].Tag != v.Tag || ev.Values[j].Value != float64(float32(v.Value)) {
				t.Errorf("event %d value %d = %+v, want %+v", i+2, j, ev.Values[j], v)
			}
		}
	}
}

// TestSecondFile checks that a second writer in the same directory (a
// resumed run) starts its own file, after the first in name order.
func TestSecondFile(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 3 {
		w, err := Create(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Scalar(int64(i), "x", float64(i)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, w.Path())
	}
	names, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, " ") != strings.Join(paths, " ") {
		t.Errorf("files in name order %v, want one per writer in creation order %v", names, paths)
	}
	for i, p := range paths {
		evs, err := ReadFile(p)
		if err != nil || len(evs) != 2 || evs[1].Step != int64(i) {
			t.Errorf("%s: %+v, %v", p, evs, err)
		}
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(filepath.Join(file, "tb")); err == nil || !strings.HasPrefix(err.Error(), "tensorboard: ") {
		t.Errorf("Create under a file: %v", err)
	}

	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Scalar(1, "x", 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Scalar(2, "x", 2); err == nil || !strings.Contains(err.Error(), "write after close") {
		t.Errorf("Scalar after Close: %v", err)
	}
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "flush after close") {
		t.Errorf("Flush after Close: %v", err)
	}

	good, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 1
		return b
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"length", flip(0), "length CRC"},
		{"data", flip(14), "data CRC"},
		{"data CRC", flip(len(good) - 1), "data CRC"},
		{"truncated", good[:len(good)-3], "unexpected EOF"},
		{"header only", good[:10], "unexpected EOF"},
	}
	for _, c := range cases {
		p := filepath.Join(dir, "bad")
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFile(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
