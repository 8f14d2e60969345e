// Package tensorboard writes scalar summaries as TensorBoard event files
// (events.out.tfevents.*), so that `tensorboard --logdir` shows a run's
// curves while it trains. It needs neither TensorFlow nor generated protobuf
// code: an event file is a sequence of TFRecords, each holding one
// serialized tensorboard.Event message, and the few fields scalars use are
// written with protowire.
//
// TFRecord framing (tensorboard/summary/writer/record_writer.py, and
// tensorflow/tsl/lib/io/record_writer.h), all integers little-endian:
//
//	uint64 length
//	uint32 masked CRC32C of the 8 length bytes
//	byte   data[length]
//	uint32 masked CRC32C of data
//
// where CRC32C is CRC-32 with the Castagnoli polynomial and a CRC is masked
// by rotating it right by 15 bits and adding 0xa282ead8
// (tensorflow/tsl/lib/hash/crc32c.h, Mask).
package tensorboard

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the messages written, from tensorflow/tensorboard's
// tensorboard/compat/proto/event.proto and summary.proto.
const (
	eventWallTime    = 1 // Event.wall_time: double
	eventStep        = 2 // Event.step: int64
	eventFileVersion = 3 // Event.file_version: string (oneof what)
	eventSummary     = 5 // Event.summary: Summary (oneof what)
	eventSessionLog  = 7 // Event.session_log: SessionLog (oneof what)
	sessionStatus    = 1 // SessionLog.status: SessionStatus enum
	sessionStart     = 1 // SessionStatus START
	summaryValue     = 1 // Summary.value: repeated Summary.Value
	valueTag         = 1 // Summary.Value.tag: string
	valueSimple      = 2 // Summary.Value.simple_value: float (oneof value)
)

// FileVersion is the file_version of the first event of every file, the one
// event.proto names as current.
const FileVersion = "brain.Event:2"

// maskDelta is added to a rotated CRC to mask it.
const maskDelta = 0xa282ead8

// crc32c returns the CRC32C (Castagnoli) checksum of b.
func crc32c(b []byte) uint32 {
	return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
}

// mask returns the masked form of crc stored in TFRecord files.
func mask(crc uint32) uint32 {
	return (crc>>15 | crc<<17) + maskDelta
}

// Value is one named scalar of a summary. TensorBoard stores it as a
// float32 (simple_value), so a float64 beyond float32's range becomes ±Inf.
type Value struct {
	Tag   string
	Value float64
}

// Writer appends events to one event file. It buffers them: they reach the
// file on Flush and Close. A Writer is not safe for concurrent use.
type Writer struct {
	path string
	f    *os.File
	buf  *bufio.Writer
	rec  []byte // reused record buffer
}

// Create makes dir (and its parents) if needed and starts a new event file
// in it, named as TensorBoard names them:
// events.out.tfevents.<unix seconds, 10 digits>.<hostname>, with ".1", ".2"…
// appended when that name is taken (a run resumed within the same second).
// The file starts with an event holding FileVersion, written through at
// once. TensorBoard reads every event file of a directory as one run, in
// name order, so a resumed run adds a new file next to its earlier ones.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host = strings.ReplaceAll(host, string(filepath.Separator), "_")
	now := time.Now()
	base := filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%010d.%s", now.Unix(), host))
	path := base
	var f *os.File
	for n := 1; ; n++ {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) || n > 1000 {
			break
		}
		path = fmt.Sprintf("%s.%d", base, n)
	}
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	w := &Writer{path: path, f: f, buf: bufio.NewWriter(f)}
	if err := w.record(versionEvent(now)); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return w, nil
}

// Path returns the event file's path.
func (w *Writer) Path() string { return w.path }

// Scalars writes one event at step holding the values, stamped with the
// current time. TensorBoard draws one curve per tag, with step on the x
// axis; tags are usually grouped by a prefix ("train/loss").
func (w *Writer) Scalars(step int64, values ...Value) error {
	if len(values) == 0 {
		return nil
	}
	return w.record(scalarEvent(time.Now(), step, values))
}

// SessionStart writes a SessionLog START event at step. It marks where a
// resumed run starts again: TensorBoard drops the events of earlier files
// at steps ≥ step, which the interrupted run wrote after its last saved
// state and the resumed one writes anew. (TensorBoard's Python loader
// ignores a run's first START and purges at every later one, so every file
// should start with one; its Rust loader ignores them and instead drops a
// series' points at steps ≥ a step that does not increase.)
func (w *Writer) SessionStart(step int64) error {
	return w.record(sessionStartEvent(time.Now(), step))
}

// Scalar writes one value at step: Scalars(step, Value{tag, v}).
func (w *Writer) Scalar(step int64, tag string, v float64) error {
	return w.Scalars(step, Value{Tag: tag, Value: v})
}

// Flush writes the buffered events to the file.
func (w *Writer) Flush() error {
	if w.f == nil {
		return fmt.Errorf("tensorboard: %s: flush after close", w.path)
	}
	if err := w.buf.Flush(); err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	return nil
}

// Close flushes the buffered events and closes the file. Closing twice is
// a no-op.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	ferr := w.Flush()
	cerr := w.f.Close()
	w.f = nil
	if ferr != nil {
		return ferr
	}
	if cerr != nil {
		return fmt.Errorf("tensorboard: %w", cerr)
	}
	return nil
}

// versionEvent serializes the first event of a file: Event{wall_time,
// file_version: FileVersion}.
func versionEvent(wall time.Time) []byte {
	b := appendWallTime(nil, wall)
	b = protowire.AppendTag(b, eventFileVersion, protowire.BytesType)
	return protowire.AppendString(b, FileVersion)
}

// sessionStartEvent serializes Event{wall_time, step, session_log:
// SessionLog{status: START}}.
func sessionStartEvent(wall time.Time, step int64) []byte {
	var log []byte
	log = protowire.AppendTag(log, sessionStatus, protowire.VarintType)
	log = protowire.AppendVarint(log, sessionStart)
	b := appendWallTime(nil, wall)
	b = protowire.AppendTag(b, eventStep, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(step))
	b = protowire.AppendTag(b, eventSessionLog, protowire.BytesType)
	return protowire.AppendBytes(b, log)
}

// scalarEvent serializes Event{wall_time, step, summary: Summary{value:
// [Value{tag, simple_value}…]}}.
func scalarEvent(wall time.Time, step int64, values []Value) []byte {
	var sum, val []byte
	for _, v := range values {
		val = protowire.AppendTag(val[:0], valueTag, protowire.BytesType)
		val = protowire.AppendString(val, v.Tag)
		val = protowire.AppendTag(val, valueSimple, protowire.Fixed32Type)
		val = protowire.AppendFixed32(val, math.Float32bits(float32(v.Value)))
		sum = protowire.AppendTag(sum, summaryValue, protowire.BytesType)
		sum = protowire.AppendBytes(sum, val)
	}
	b := appendWallTime(nil, wall)
	b = protowire.AppendTag(b, eventStep, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(step))
	b = protowire.AppendTag(b, eventSummary, protowire.BytesType)
	return protowire.AppendBytes(b, sum)
}

// appendWallTime appends Event.wall_time, seconds since the Unix epoch.
func appendWallTime(b []byte, t time.Time) []byte {
	b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(float64(t.UnixNano())/1e9))
}

// record frames data as one TFRecord into the buffer.
func (w *Writer) record(data []byte) error {
	if w.f == nil {
		return fmt.Errorf("tensorboard: %s: write after close", w.path)
	}
	w.rec = appendRecord(w.rec[:0], data)
	if _, err := w.buf.Write(w.rec); err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	return nil
}

// appendRecord appends data framed as one TFRecord to b.
func appendRecord(b, data []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(data)))
	b = binary.LittleEndian.AppendUint32(b, mask(crc32c(b[len(b)-8:])))
	b = append(b, data...)
	return binary.LittleEndian.AppendUint32(b, mask(crc32c(data)))
}
