package compose

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/optlab/optlab/sdk/optim"
)

// vecState is the saved state of a method whose whole state is its
// vectors: their values travel with the host's checkpoint, the blob only
// names them.
type vecState struct {
	Version int         `json:"version"`
	Vecs    []optim.Vec `json:"vecs"`
}

// SaveVecs is SaveState for a method (or rule) named name whose whole
// state is the vectors vecs: the blob {"version": 1, "vecs": […]} and the
// vectors for the host to save.
func SaveVecs(name string, vecs []optim.Vec) ([]byte, []optim.Vec, error) {
	b, err := json.Marshal(vecState{Version: 1, Vecs: vecs})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: save state: %w", name, err)
	}
	return b, vecs, nil
}

// LoadVecs is LoadState for such a method: it accepts a blob of SaveVecs
// that names exactly the vectors want (the host restores their values
// into the handles Configure allocated), and refuses any other, naming
// what it wanted.
func LoadVecs(name string, blob []byte, want []optim.Vec) error {
	var s vecState
	if err := json.Unmarshal(blob, &s); err != nil {
		return fmt.Errorf("%s: load state: %w", name, err)
	}
	if s.Version != 1 || !slices.Equal(s.Vecs, want) {
		return fmt.Errorf("%s: load state: unsupported state %+v (want version 1, vecs %v)", name, s, want)
	}
	return nil
}
