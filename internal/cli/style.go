package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// isTerminal reports whether w is a character device (a terminal), not a
// file, a pipe or a buffer.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// useColor reports whether output to w gets colours: on a terminal, unless
// NO_COLOR is set (https://no-color.org) or TERM is dumb.
func useColor(env *Env, w io.Writer) bool {
	return isTerminal(w) && env.Getenv("NO_COLOR") == "" && env.Getenv("TERM") != "dumb"
}

// useSpinner reports whether w can show a spinner: a terminal that is not
// dumb.
func useSpinner(env *Env, w io.Writer) bool {
	return isTerminal(w) && env.Getenv("TERM") != "dumb"
}

// ANSI styles.
const (
	styleReset   = "\x1b[0m"
	styleBold    = "\x1b[1m"
	styleDim     = "\x1b[2m"
	styleRed     = "\x1b[31m"
	styleGreen   = "\x1b[32m"
	styleYellow  = "\x1b[33m"
	styleMagenta = "\x1b[35m"
	styleCyan    = "\x1b[36m"
)

// palette colours text, or leaves it plain.
type palette struct{ on bool }

func (p palette) paint(style, s string) string {
	if !p.on {
		return s
	}
	return style + s + styleReset
}

// spinner shows an animated line on a terminal while something runs (a
// tool call). start and stop are called from one goroutine (the
// renderer's); the animation runs on its own, and stop waits for it and
// clears its line.
type spinner struct {
	w        io.Writer
	interval time.Duration
	mu       sync.Mutex // serialises the animation's writes with stop's
	stopc    chan struct{}
	done     chan struct{}
}

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// start animates label (stopping an animation already running).
func (s *spinner) start(label string, p palette) {
	if s == nil {
		return
	}
	s.stop()
	s.stopc, s.done = make(chan struct{}), make(chan struct{})
	stopc, done := s.stopc, s.done
	began := time.Now()
	go func() {
		defer close(done)
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for i := 0; ; i++ {
			s.mu.Lock()
			fmt.Fprintf(s.w, "\r%s %s %s", p.paint(styleCyan, spinFrames[i%len(spinFrames)]), label,
				p.paint(styleDim, time.Since(began).Round(100*time.Millisecond).String()))
			s.mu.Unlock()
			select {
			case <-stopc:
				return
			case <-t.C:
			}
		}
	}()
}

// stop ends the animation, if any, and clears its line.
func (s *spinner) stop() {
	if s == nil || s.stopc == nil {
		return
	}
	close(s.stopc)
	<-s.done
	s.stopc = nil
	s.mu.Lock()
	fmt.Fprint(s.w, "\r\x1b[K")
	s.mu.Unlock()
}
