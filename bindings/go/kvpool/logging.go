package kvpool

// kvpool_set_log_callback: the library's diagnostics in a Go logger. The C
// side is the shim in ../log_callback.i (built into kvpool_wrap.c); the
// library calls the function exported here with a runtime/cgo.Handle of the
// LogFunc. This file's preamble may hold declarations only (cgo's rule for
// files with //export).

/*
#include <stdint.h>
*/
import "C"

import (
	"runtime/cgo"
	"strconv"
)

// LogLevel is the severity of a library message (kvpool_log_level in log.h);
// a smaller value is more severe.
type LogLevel int32

// Log levels.
const (
	LogError LogLevel = 0 // a bug or broken hardware: INTERNAL, CUDA and DEVICE_FAULT failures
	LogWarn  LogLevel = 1 // storage backend failures, host-tier backups that could not start, I/O and host-memory failures
	LogInfo  LogLevel = 2 // pools created (with their sizing) and destroyed
	LogDebug LogLevel = 3 // every other failed call, with its status and message
)

// String returns "error", "warn", "info" or "debug".
func (l LogLevel) String() string {
	switch l {
	case LogError:
		return "error"
	case LogWarn:
		return "warn"
	case LogInfo:
		return "info"
	case LogDebug:
		return "debug"
	}
	return "LogLevel(" + strconv.Itoa(int(l)) + ")"
}

// LogFunc receives one library message: one line of text without a trailing
// newline.
type LogFunc func(level LogLevel, message string)

// SetLogCallback routes the library's messages of level (and more severe) to
// f, for every pool of the process; a nil f turns logging off (the default).
// When it returns, the previous function is not running and is never called
// again.
//
// f runs on the goroutine of the failing call or, for the storage tier's
// messages, on one of a pool's storage threads (C threads: cgo runs f there as
// on any foreign thread), possibly on several at once: it must be safe for
// concurrent use, return quickly, and never call SetLogCallback (which then
// fails with ErrInvalidArgument). A panic in f is recovered and dropped.
//
// To send the messages to log/slog (Go 1.21+), for instance:
//
//	kvpool.SetLogCallback(kvpool.LogWarn, func(l kvpool.LogLevel, msg string) {
//		slog.Log(context.Background(), map[kvpool.LogLevel]slog.Level{
//			kvpool.LogError: slog.LevelError, kvpool.LogWarn: slog.LevelWarn,
//			kvpool.LogInfo: slog.LevelInfo, kvpool.LogDebug: slog.LevelDebug}[l], msg, "lib", "kvpool")
//	})
func SetLogCallback(level LogLevel, f LogFunc) error {
	var handle cgo.Handle
	if f != nil {
		handle = cgo.NewHandle(f)
	}
	var previous uint64
	if err := Kvpool_set_log_callback(uintptr(handle), Enum_SS_kvpool_log_level(level), &previous); err != nil {
		if handle != 0 {
			handle.Delete() // the library never saw it
		}
		return err
	}
	if previous != 0 {
		cgo.Handle(uintptr(previous)).Delete() // no longer called
	}
	return nil
}

//export kvpoolGoLog
func kvpoolGoLog(user C.uintptr_t, level C.int32_t, message *C.char) {
	defer func() { _ = recover() }() // a panic must not unwind into the library's C frames
	f := cgo.Handle(user).Value().(LogFunc)
	f(LogLevel(level), C.GoString(message))
}
