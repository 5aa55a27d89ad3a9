// Command workload is the one program of the real node's test images (framework.BuildNodeImages): with
// -pause it is the sandbox's pause process (waits for a signal, reaps children); otherwise it burns a set CPU,
// holds a set memory and, with -duration, exits after that long (an init container) with -exit-code. With
// -share, the pods of a Deployment share a total load as behind a Service: each announces itself in the
// shared folder and burns the total written in its file "total" divided by the pods announced. Called as
// consume-cpu or stress, it is the resource-consumer stand-in (consumer.go).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if consumer() {
		return
	}
	pause := flag.Bool("pause", false, "be a pod sandbox's pause process")
	millicores := flag.Int("millicores", 0, "CPU to burn, in millicores")
	memoryMiB := flag.Int("memory-mib", 0, "memory to hold (touched, so it counts in the working set), in MiB")
	duration := flag.Duration("duration", 0, "exit after this long (0: run until stopped)")
	exitCode := flag.Int("exit-code", 0, "exit status at the end of -duration")
	share := flag.String("share", "", "folder shared by the pods that split the load in its file total (millicores)")
	flag.Parse()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if *pause {
		reap()
		<-sigs
		return
	}
	held := hold(*memoryMiB)
	if *share != "" {
		go shareLoad(*share)
	} else {
		setLoad(*millicores)
	}
	fmt.Printf("workload: burning %dm, holding %d MiB, for %s\n", *millicores, *memoryMiB, *duration)
	var end <-chan time.Time
	if *duration > 0 {
		end = time.After(*duration)
	}
	select {
	case <-sigs:
	case <-end:
		runtime.KeepAlive(held)
		os.Exit(*exitCode)
	}
	runtime.KeepAlive(held)
}

// hold allocates mib MiB and writes every page, so the kernel charges it all to the container.
func hold(mib int) []byte {
	b := make([]byte, mib<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}

// shareLoad announces this pod in dir every half second and burns the total over the pods announced in the
// last 3 seconds.
func shareLoad(dir string) {
	host, _ := os.Hostname()
	for {
		now := time.Now()
		_ = os.WriteFile(filepath.Join(dir, "pod-"+host), nil, 0o644)
		_ = os.Chtimes(filepath.Join(dir, "pod-"+host), now, now)
		total := 0
		if data, err := os.ReadFile(filepath.Join(dir, "total")); err == nil {
			total, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		pods := 0
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), "pod-") && now.Sub(fi.ModTime()) < 3*time.Second {
				pods++
			}
		}
		setLoad(total / max(pods, 1))
		time.Sleep(500 * time.Millisecond)
	}
}

// reap waits for every child re-parented to the sandbox's PID 1, as pause does.
func reap() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	go func() {
		for range ch {
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
		}
	}()
}
