package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The resource-consumer stand-in (framework.ResourceConsumerImage) holds this binary as /consume-cpu/consume-cpu
// and /usr/bin/stress: called by either name it accepts the command lines metrics-server's end-to-end suite gives
// registry.k8s.io/e2e-test-images/resource-consumer:1.9, and does what that image's programs do.

// consumer runs the program os.Args[0] names, if it is one of the stand-in's, and reports whether it was.
func consumer() bool {
	switch filepath.Base(os.Args[0]) {
	case "consume-cpu":
		consumeCPU(os.Args[1:])
	case "stress":
		stress(os.Args[1:])
	default:
		return false
	}
	return true
}

// consumeCPU is resource-consumer's consume-cpu: burn --millicores for --duration-sec, then exit 0.
func consumeCPU(args []string) {
	fs := flag.NewFlagSet("consume-cpu", flag.ExitOnError)
	millicores := fs.Int("millicores", 0, "CPU to burn, in millicores")
	seconds := fs.Int("duration-sec", 0, "how long to burn, in seconds")
	_ = fs.Parse(args)
	fmt.Printf("consume-cpu: burning %dm for %ds\n", *millicores, *seconds)
	setLoad(*millicores)
	time.Sleep(time.Duration(*seconds) * time.Second)
}

// stress is the part of stress(1) the suite uses: -m workers each holding --vm-bytes (touched) and, with
// --vm-hang 0, keeping it until -t seconds have passed.
func stress(args []string) {
	fs := flag.NewFlagSet("stress", flag.ExitOnError)
	workers := fs.Int("m", 0, "memory workers")
	vmBytes := fs.String("vm-bytes", "256M", "bytes each worker holds (B, K, M, G suffixes, powers of 1024)")
	_ = fs.Int("vm-hang", 0, "seconds to hold before freeing; 0 holds until the end (the only value supported)")
	timeout := fs.Int("t", 0, "exit after this many seconds (0: never)")
	_ = fs.Parse(args)
	size, err := parseStressBytes(*vmBytes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stress:", err)
		os.Exit(1)
	}
	var held [][]byte
	for range *workers {
		held = append(held, hold(int(size>>20)))
	}
	fmt.Printf("stress: %d workers holding %d bytes each\n", *workers, size)
	if *timeout > 0 {
		time.Sleep(time.Duration(*timeout) * time.Second)
	} else {
		select {}
	}
	runtime.KeepAlive(held)
}

// parseStressBytes reads stress's sizes: a number with an optional B, K, M or G suffix (powers of 1024).
func parseStressBytes(s string) (int64, error) {
	mult := int64(1)
	num := strings.ToUpper(s)
	if i := strings.IndexAny(num, "BKMG"); i == len(num)-1 && i > 0 {
		mult = map[byte]int64{'B': 1, 'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}[num[i]]
		num = num[:i]
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid --vm-bytes %q: want a number with an optional B, K, M or G suffix", s)
	}
	return n * mult, nil
}
