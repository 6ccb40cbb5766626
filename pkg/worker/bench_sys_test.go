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
// ok is false elsewhere), its context switches and its CPU time (user and
// system, in microseconds).
func procCounters() (c [4]float64, ok bool) {
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
	c[3] = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
	return c, read("/proc/self/io", map[string]int{"syscr": 0, "syscw": 1})
}

// reportSyscalls starts counting the process's reads, writes, context
// switches and CPU time (the server's and the clients' together: one
// process) and returns the function that reports them per run, as
// syscr/run, syscw/run, ctxsw/run and cpu-us/run. The counts say how well
// messages are batched: every awaited round trip costs a write and a read
// on each side. The CPU time a run costs varies less than runs/s when
// other work shares the machine (it takes cores, not CPU time, from the
// benchmark), so bench-fleet compares it too.
func reportSyscalls(b *testing.B) func() {
	start, ok := procCounters()
	return func() {
		end, ok2 := procCounters()
		if !ok || !ok2 || b.N == 0 {
			return
		}
		for i, unit := range []string{"syscr/run", "syscw/run", "ctxsw/run", "cpu-us/run"} {
			b.ReportMetric((end[i]-start[i])/float64(b.N), unit)
		}
	}
}
