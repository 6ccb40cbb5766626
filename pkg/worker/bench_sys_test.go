package worker_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// procCounters reads this process's system-call counts from /proc (Linux;
// ok is false elsewhere) and its context switches.
func procCounters() (c [3]float64, ok bool) {
	read := func(path string, keys map[string]int) bool {
		f, err := os.Open(path)
		if err != nil {
			return false
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, found := strings.Cut(sc.Text(), ":")
			if i, want := keys[k]; want && found {
				n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return false
				}
				c[i] += n
			}
		}
		return sc.Err() == nil
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return c, false
	}
	c[2] = float64(ru.Nvcsw + ru.Nivcsw)
	return c, read("/proc/self/io", map[string]int{"syscr": 0, "syscw": 1})
}

// reportSyscalls starts counting the process's reads, writes and context
// switches (the server's and the clients' together: one process) and
// returns the function that reports them per run, as syscr/run, syscw/run
// and ctxsw/run. The counts say how well messages are batched: every
// awaited round trip costs a write and a read on each side.
func reportSyscalls(b *testing.B) func() {
	start, ok := procCounters()
	return func() {
		end, ok2 := procCounters()
		if !ok || !ok2 || b.N == 0 {
			return
		}
		for i, unit := range []string{"syscr/run", "syscw/run", "ctxsw/run"} {
			b.ReportMetric((end[i]-start[i])/float64(b.N), unit)
		}
	}
}
