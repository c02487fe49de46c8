package main

import (
	"io"
	"os"
	"strconv"
	"syscall"
)

// lifelineEnv names an inherited file descriptor: the read end of a pipe whose
// write end only the launcher holds. When the launcher dies, however it dies,
// the pipe reaches EOF and the component shuts itself down as on SIGTERM, so no
// control plane outlives the process that started it.
const lifelineEnv = "KCP_LIFELINE_FD"

func watchLifeline() {
	v := os.Getenv(lifelineEnv)
	if v == "" {
		return
	}
	os.Unsetenv(lifelineEnv)
	fd, err := strconv.Atoi(v)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "lifeline")
	go func() {
		_, _ = io.Copy(io.Discard, f)
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}()
}
