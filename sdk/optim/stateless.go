package optim

import (
	"context"
	"fmt"
)

// Stateless is embedded by optimizers whose state between steps lives on
// the host only (the base optimizer's, the live parameters): it implements
// Stateful with an empty state, so that the host can checkpoint and resume
// them, and refuses a non-empty blob.
type Stateless struct{}

// SaveState implements Stateful: no blob, no vectors.
func (Stateless) SaveState(context.Context) ([]byte, []Vec, error) { return nil, nil, nil }

// LoadState implements Stateful: only an empty state loads.
func (Stateless) LoadState(_ context.Context, blob []byte) error {
	if len(blob) != 0 {
		return fmt.Errorf("unexpected %d-byte state for a stateless optimizer", len(blob))
	}
	return nil
}
