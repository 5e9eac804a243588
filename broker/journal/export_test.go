package journal

// WaitSpare waits for the spare segment being written ahead, if any
// (spare.go), so a test sees its result.
func (w *Writer) WaitSpare() { w.prepared.Wait() }
