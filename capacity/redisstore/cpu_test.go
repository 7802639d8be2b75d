package redisstore

import "syscall"

// ProcessCPU is the CPU time (user and system) this process has used, in
// nanoseconds, or 0 if the system does not say: the client's side of the
// benchmarks of both test packages.
func ProcessCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
