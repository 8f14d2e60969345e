package tensorboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protowire"
)

// Event is the part of a tensorboard.Event message that scalar files use.
type Event struct {
	WallTime    float64 // seconds since the Unix epoch
	Step        int64
	FileVersion string  // set in a file's first event only
	Values      []Value // the summary's simple values, in file order
	// SessionStart is set for a SessionLog START event (see
	// Writer.SessionStart).
	SessionStart bool
}

// ReadFile reads back an event file: it checks every record's framing and
// both CRCs and decodes each Event's wall time, step, file version,
// simple-valued summary values and SessionLog START; other fields (graphs, histograms, tensors)
// are skipped. It exists to check what Writer writes, in tests and tools.
func ReadFile(path string) ([]Event, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	var events []Event
	for off := 0; off < len(data); {
		rec, n, err := readRecord(data[off:])
		if err != nil {
			return nil, fmt.Errorf("tensorboard: %s: record at byte %d: %w", path, off, err)
		}
		ev, err := decodeEvent(rec)
		if err != nil {
			return nil, fmt.Errorf("tensorboard: %s: record at byte %d: %w", path, off, err)
		}
		events = append(events, ev)
		off += n
	}
	return events, nil
}

// readRecord checks the TFRecord at the start of b and returns its data and
// its length in b.
func readRecord(b []byte) ([]byte, int, error) {
	if len(b) < 12 {
		return nil, 0, io.ErrUnexpectedEOF
	}
	if got, want := binary.LittleEndian.Uint32(b[8:]), mask(crc32c(b[:8])); got != want {
		return nil, 0, fmt.Errorf("length CRC %#08x, want %#08x", got, want)
	}
	n := binary.LittleEndian.Uint64(b)
	if len(b) < 16 || n > uint64(len(b)-16) {
		return nil, 0, fmt.Errorf("%d bytes of data announced: %w", n, io.ErrUnexpectedEOF)
	}
	data := b[12 : 12+n]
	if got, want := binary.LittleEndian.Uint32(b[12+n:]), mask(crc32c(data)); got != want {
		return nil, 0, fmt.Errorf("data CRC %#08x, want %#08x", got, want)
	}
	return data, int(16 + n), nil
}

// errField reports a field whose wire type is not the one event.proto and
// summary.proto give it.
var errField = errors.New("field of unexpected wire type")

// decodeEvent decodes the scalar part of a serialized Event.
func decodeEvent(b []byte) (Event, error) {
	var ev Event
	err := forFields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			ev.WallTime = math.Float64frombits(x)
		case num == eventStep && typ == protowire.VarintType:
			ev.Step = int64(x)
		case num == eventFileVersion && typ == protowire.BytesType:
			ev.FileVersion = string(v)
		case num == eventSummary && typ == protowire.BytesType:
			return forFields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != summaryValue {
					return nil
				}
				if typ != protowire.BytesType {
					//lint:ignore ST1005 Summary.value is the protobuf field's name
					return fmt.Errorf("Summary.value: %w", errField)
				}
				val, ok, err := decodeValue(v)
				if ok {
					ev.Values = append(ev.Values, val)
				}
				return err
			})
		case num == eventSessionLog && typ == protowire.BytesType:
			return forFields(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if num == sessionStatus && typ == protowire.VarintType && x == sessionStart {
					ev.SessionStart = true
				}
				return nil
			})
		case num == eventWallTime || num == eventStep || num == eventFileVersion || num == eventSummary || num == eventSessionLog:
			return fmt.Errorf("Event field %d, wire type %d: %w", num, typ, errField)
		}
		return nil
	})
	return ev, err
}

// decodeValue decodes a Summary.Value; ok is false when it holds no
// simple_value.
func decodeValue(b []byte) (v Value, ok bool, err error) {
	err = forFields(b, func(num protowire.Number, typ protowire.Type, s []byte, x uint64) error {
		switch {
		case num == valueTag && typ == protowire.BytesType:
			v.Tag = string(s)
		case num == valueSimple && typ == protowire.Fixed32Type:
			v.Value, ok = float64(math.Float32frombits(uint32(x))), true
		case num == valueTag || num == valueSimple:
			return fmt.Errorf("Summary.Value field %d, wire type %d: %w", num, typ, errField)
		}
		return nil
	})
	return v, ok, err
}

// forFields calls f for each field of the serialized message b, with the
// field's bytes (BytesType) or its numeric value (the other wire types).
func forFields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// Point is one value of a series.
type Point struct {
	Step  int64
	Value float64
}

// ReadRun reads the event files of a run's folder as TensorBoard's loader
// merges them: files in name order, and a session start after the first
// drops the values logged at steps ≥ its step (what an interrupted attempt
// logged past the state it resumed from). It returns each tag's series and
// the number of files.
func ReadRun(dir string) (map[string][]Point, int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil {
		return nil, 0, err
	}
	view := map[string][]Point{}
	starts := 0
	for _, f := range files {
		evs, err := ReadFile(f)
		if err != nil {
			return nil, 0, err
		}
		for _, ev := range evs {
			if ev.SessionStart {
				if starts++; starts > 1 {
					for tag, ps := range view {
						kept := ps[:0]
						for _, p := range ps {
							if p.Step < ev.Step {
								kept = append(kept, p)
							}
						}
						view[tag] = kept
					}
				}
			}
			for _, v := range ev.Values {
				view[v.Tag] = append(view[v.Tag], Point{ev.Step, v.Value})
			}
		}
	}
	return view, len(files), nil
}
