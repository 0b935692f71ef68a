package conduit

// This file is the package-level API: each function is the Job method of
// the same name on this worker's Job (Default), documented there.

// on returns f's result on the Job of this worker, or before Init has
// returned an error wrapping ErrNotInitialized that names call.
func on[R any](call string, f func(*Job) (R, error)) (R, error) {
	j, err := job(call)
	if err != nil {
		var zero R
		return zero, err
	}
	return f(j)
}

// on0 is on for the calls that return only an error.
func on0(call string, f func(*Job) error) error {
	j, err := job(call)
	if err != nil {
		return err
	}
	return f(j)
}

// Rank returns this worker's rank in [0, Size()).
func Rank() int { return must("Rank").Rank() }

// Size returns the number of ranks, N.
func Size() int { return must("Size").Size() }

// World returns the team of the whole job.
func World() *Team { return must("World").World() }

// HostRanks is Job.HostRanks.
func HostRanks() []int { return must("HostRanks").HostRanks() }

// Neighbors is Job.Neighbors.
func Neighbors() []int {
	if j := std.job; j != nil {
		return j.Neighbors()
	}
	return nil
}

// SetReturnedHandler is Job.SetReturnedHandler.
func SetReturnedHandler(h func(Returned)) { must("SetReturnedHandler").SetReturnedHandler(h) }

// Exit is Job.Exit.
func Exit(code int) { must("Exit").Exit(code) }

// Finalize is Job.Finalize.
func Finalize(code int) { must("Finalize").Finalize(code) }

// Attach is Job.Attach.
func Attach(handlers []HandlerEntry, segmentSize int) ([]byte, error) {
	return on("Attach", func(j *Job) ([]byte, error) { return j.Attach(handlers, segmentSize) })
}

// SegmentSize is Job.SegmentSize.
func SegmentSize(rank int) int {
	if j := std.job; j != nil {
		return j.SegmentSize(rank)
	}
	return 0
}

// LocalView is Job.LocalView.
func LocalView(rank int) []byte {
	if j := std.job; j != nil {
		return j.LocalView(rank)
	}
	return nil
}

// RequestShort is Job.RequestShort.
func RequestShort(dest, handler int, args ...uint32) error {
	return on0("RequestShort", func(j *Job) error { return j.RequestShort(dest, handler, args...) })
}

// RequestMedium is Job.RequestMedium.
func RequestMedium(dest, handler int, payload []byte, args ...uint32) error {
	return on0("RequestMedium", func(j *Job) error { return j.RequestMedium(dest, handler, payload, args...) })
}

// RequestLong is Job.RequestLong.
func RequestLong(dest, handler int, payload []byte, offset uint64, args ...uint32) error {
	return on0("RequestLong", func(j *Job) error { return j.RequestLong(dest, handler, payload, offset, args...) })
}

// PrepareRequestMedium is Job.PrepareRequestMedium.
func PrepareRequestMedium(dest, n, nargs int) (Prepared, error) {
	j, err := job("PrepareRequestMedium")
	if err != nil {
		return Prepared{}, err
	}
	return j.PrepareRequestMedium(dest, n, nargs)
}

// PrepareRequestLong is Job.PrepareRequestLong.
func PrepareRequestLong(dest, n, nargs int, offset uint64) (Prepared, error) {
	j, err := job("PrepareRequestLong")
	if err != nil {
		return Prepared{}, err
	}
	return j.PrepareRequestLong(dest, n, nargs, offset)
}

// Poll is Job.Poll.
func Poll() error { return on0("Poll", (*Job).Poll) }

// WaitUntil is Job.WaitUntil.
func WaitUntil(cond func() bool) error {
	return on0("WaitUntil", func(j *Job) error { return j.WaitUntil(cond) })
}

// Drain is Job.Drain.
func Drain() error { return on0("Drain", (*Job).Drain) }

// Barrier is World().Barrier().
func Barrier() error { return on0("Barrier", func(j *Job) error { return j.world.Barrier() }) }

// Put is Job.Put.
func Put(dest int, offset uint64, data []byte) error {
	j, err := job("Put")
	if err != nil {
		return err
	}
	return j.Put(dest, offset, data)
}

// PutNB is Job.PutNB.
func PutNB(dest int, offset uint64, data []byte) (*Handle[struct{}], error) {
	return on("PutNB", func(j *Job) (*Handle[struct{}], error) { return j.PutNB(dest, offset, data) })
}

// Get is Job.Get.
func Get(src int, offset uint64, buf []byte) error {
	j, err := job("Get")
	if err != nil {
		return err
	}
	return j.Get(src, offset, buf)
}

// GetNB is Job.GetNB.
func GetNB(src int, offset uint64, buf []byte) (*Handle[struct{}], error) {
	return on("GetNB", func(j *Job) (*Handle[struct{}], error) { return j.GetNB(src, offset, buf) })
}

// PutV is Job.PutV.
func PutV(dest int, pieces []Piece) error {
	return on0("PutV", func(j *Job) error { return j.PutV(dest, pieces) })
}

// PutVNB is Job.PutVNB.
func PutVNB(dest int, pieces []Piece) (*Handle[struct{}], error) {
	return on("PutVNB", func(j *Job) (*Handle[struct{}], error) { return j.PutVNB(dest, pieces) })
}

// GetV is Job.GetV.
func GetV(src int, pieces []Piece) error {
	return on0("GetV", func(j *Job) error { return j.GetV(src, pieces) })
}

// GetVNB is Job.GetVNB.
func GetVNB(src int, pieces []Piece) (*Handle[struct{}], error) {
	return on("GetVNB", func(j *Job) (*Handle[struct{}], error) { return j.GetVNB(src, pieces) })
}

// PutIndexed is Job.PutIndexed.
func PutIndexed(dest int, offsets []uint64, size int, data []byte) error {
	return on0("PutIndexed", func(j *Job) error { return j.PutIndexed(dest, offsets, size, data) })
}

// PutIndexedNB is Job.PutIndexedNB.
func PutIndexedNB(dest int, offsets []uint64, size int, data []byte) (*Handle[struct{}], error) {
	return on("PutIndexedNB", func(j *Job) (*Handle[struct{}], error) { return j.PutIndexedNB(dest, offsets, size, data) })
}

// GetIndexed is Job.GetIndexed.
func GetIndexed(src int, offsets []uint64, size int, buf []byte) error {
	return on0("GetIndexed", func(j *Job) error { return j.GetIndexed(src, offsets, size, buf) })
}

// GetIndexedNB is Job.GetIndexedNB.
func GetIndexedNB(src int, offsets []uint64, size int, buf []byte) (*Handle[struct{}], error) {
	return on("GetIndexedNB", func(j *Job) (*Handle[struct{}], error) { return j.GetIndexedNB(src, offsets, size, buf) })
}

// PutStrided is Job.PutStrided.
func PutStrided(dest int, r Strided, data []byte, dataStride int) error {
	return on0("PutStrided", func(j *Job) error { return j.PutStrided(dest, r, data, dataStride) })
}

// PutStridedNB is Job.PutStridedNB.
func PutStridedNB(dest int, r Strided, data []byte, dataStride int) (*Handle[struct{}], error) {
	return on("PutStridedNB", func(j *Job) (*Handle[struct{}], error) { return j.PutStridedNB(dest, r, data, dataStride) })
}

// GetStrided is Job.GetStrided.
func GetStrided(src int, r Strided, buf []byte, bufStride int) error {
	return on0("GetStrided", func(j *Job) error { return j.GetStrided(src, r, buf, bufStride) })
}

// GetStridedNB is Job.GetStridedNB.
func GetStridedNB(src int, r Strided, buf []byte, bufStride int) (*Handle[struct{}], error) {
	return on("GetStridedNB", func(j *Job) (*Handle[struct{}], error) { return j.GetStridedNB(src, r, buf, bufStride) })
}
