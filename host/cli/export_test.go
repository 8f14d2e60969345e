package cli

// SetDeviceLost replaces the check for a lost CUDA context in the grid
// loop (a CPU has none to lose) and returns the function that restores it.
func SetDeviceLost(f func() error) (restore func()) {
	old := deviceLost
	deviceLost = f
	return func() { deviceLost = old }
}
