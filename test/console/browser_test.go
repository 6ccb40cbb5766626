package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumBinaries are the names Chromium goes by (Debian: chromium).
var chromiumBinaries = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// chromiumPath returns the browser binary: $LOVIA_CHROMIUM, else the
// first of chromiumBinaries on PATH.
func chromiumPath() (string, error) {
	if p := os.Getenv("LOVIA_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range chromiumBinaries {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium found (looked for %s on PATH, and $LOVIA_CHROMIUM): the console's tests need a real browser; "+
		"install it with `sudo apt-get install -y chromium` (.ci/run does) or set LOVIA_CHROMIUM to its path", strings.Join(chromiumBinaries, ", "))
}

// findChromium returns the browser binary, failing the test (not skipping
// it) when there is none.
func findChromium(t *testing.T) string {
	t.Helper()
	p, err := chromiumPath()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// browser is one headless Chromium tab.
type browser struct {
	t         *testing.T
	ctx       context.Context
	artifacts string
}

// newBrowser starts headless Chromium; it stops at cleanup.
func newBrowser(t *testing.T, artifacts string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(findChromium(t)),
		chromedp.NoSandbox, // root in CI containers
		chromedp.WindowSize(1280, 960),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancel()
		acancel()
	})
	// The first call starts the browser, which lives as long as its
	// context: it gets no timeout of its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx, artifacts: artifacts}
}

// fail ends the test naming what it waited for, with the page's text.
func (b *browser) fail(what string, timeout time.Duration, err error) {
	b.t.Helper()
	b.t.Fatalf("%s (within %s): %v\npage %s:\n%s", what, timeout, err, b.location(), b.text())
}

// do runs steps within timeout.
func (b *browser) do(what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail(what, timeout, err)
	}
}

// run runs one action within timeout and returns its value.
func run[T any](b *browser, what string, timeout time.Duration, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fail(what, timeout, err)
	}
	return v
}

// waitFor polls a JavaScript expression until it is truthy, and returns it.
func waitFor[T any](b *browser, what string, timeout time.Duration, expr string) T {
	b.t.Helper()
	return run(b, "waiting for "+what, timeout, chromedp.Poll[T](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
}

// eval evaluates a JavaScript expression once.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	return run(b, "evaluating "+expr, 30*time.Second, chromedp.Evaluate[T](expr))
}

// visible waits until the CSS selector matches a visible element.
func (b *browser) visible(what, sel string, timeout time.Duration) {
	b.t.Helper()
	b.do("waiting for "+what+" ("+sel+")", timeout, chromedp.WaitVisible(chromedp.CSS(sel)))
}

// present waits until the CSS selector matches an element (shown or not:
// an <option> has no box).
func (b *browser) present(what, sel string, timeout time.Duration) {
	b.t.Helper()
	waitFor[bool](b, what+" ("+sel+")", timeout, "!!document.querySelector("+strconv.Quote(sel)+")")
}

// textOf is the rendered text of the first element sel matches.
func (b *browser) textOf(sel string) string {
	b.t.Helper()
	return run(b, "reading "+sel, 30*time.Second, chromedp.Text(chromedp.CSS(sel)))
}

// open navigates to url and waits for the console's shell.
func (b *browser) open(url string) {
	b.t.Helper()
	b.do("opening "+url, 30*time.Second, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#nav")))
}

// reload reloads the page (opening the address it shows is no reload:
// the same address with a fragment stays in the page).
func (b *browser) reload() {
	b.t.Helper()
	b.do("reloading", 30*time.Second, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#nav")))
}

// screenshot saves the viewport as <name>.png in the artifacts directory.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	png := run(b, "taking screenshot "+name, 30*time.Second, chromedp.CaptureScreenshot())
	path := filepath.Join(b.artifacts, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s (%d KB)", path, len(png)/1024)
	return path
}

func (b *browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	return loc
}

func (b *browser) text() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	if err != nil {
		return fmt.Sprintf("(no text: %v)", err)
	}
	return s
}
