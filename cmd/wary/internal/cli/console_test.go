package cli_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/nodeproc"
)

// consoleRun is a wary console running in process.
type consoleRun struct {
	base   string
	errout *nodeproc.SyncBuffer
}

// startConsole runs wary console with args on a free loopback port until
// the test ends, and returns its base URL once it listens.
func startConsole(t *testing.T, args ...string) *consoleRun {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	run := &consoleRun{errout: &nodeproc.SyncBuffer{}}
	code := make(chan int, 1)
	go func() {
		code <- cli.Run(ctx, append([]string{"console", "--addr", "127.0.0.1:0"}, args...), cli.IO{Out: pw, Err: run.errout, Getenv: func(string) string { return "" }})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if c := <-code; c != cli.ExitOK {
			t.Errorf("wary console exited %d: %s", c, run.errout.String())
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("wary console did not start: %v: %s", err, run.errout.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("wary console said %q, not where it listens", line)
	}
	run.base = strings.Fields(line[i:])[0]
	return run
}

// browser starts headless Chromium for the test, or skips (fails under
// WARY_REQUIRE_SERVICES=1) when it is not installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("WARY_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err != nil {
		if os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
			t.Fatalf("chromium not found at %s (install Debian's chromium, or set WARY_CHROMIUM): %v", path, err)
		}
		t.Skipf("chromium not found at %s (install Debian's chromium, set WARY_CHROMIUM, or WARY_REQUIRE_SERVICES=1 to fail)", path)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-component-update", true), chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(tcancel)
	return tctx
}

// browse runs steps in the browser, failing the test on error.
func browse(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// screenshot takes a picture of the page and, with WARY_SCREENSHOTS=1,
// writes it to docs/images/console-NAME.png (the docs' pictures; a run
// without it leaves the checkout as it was).
func screenshot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		png, err := chromedp.FullScreenshot(100)(ctx, t)
		if err != nil {
			return err
		}
		if len(png) == 0 {
			return fmt.Errorf("screenshot %s: empty", name)
		}
		if os.Getenv("WARY_SCREENSHOTS") != "1" {
			return nil
		}
		return os.WriteFile(filepath.Join("..", "..", "..", "..", "docs", "images", "console-"+name+".png"), png, 0o644)
	})
}

// textOf reads the text of the first element sel matches.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func wantText(t *testing.T, what, got string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Errorf("%s: %q lacks %q", what, got, p)
		}
	}
}

// TestConsoleRefusesNonLoopbackWithoutToken: any address but loopback
// needs a token, and the refusal says TLS is the user's to add.
func TestConsoleRefusesNonLoopbackWithoutToken(t *testing.T) {
	w := newWary(t)
	r := w.want(cli.ExitError, "console", "--addr", "0.0.0.0:0", "--broker", "mem://orders", "--subscription", "mem://orders/billing",
		"--postgres", "postgres://wary:s3cret@127.0.0.1:1/db", "--consumer", "billing")
	for _, p := range []string{"not a loopback address", "--token", "TLS"} {
		if !strings.Contains(r.errout, p) {
			t.Errorf("stderr %q lacks %q", r.errout, p)
		}
	}
	if strings.Contains(r.errout+r.out, "s3cret") {
		t.Errorf("the refusal shows the password: %s", r.errout)
	}
	for _, addr := range []string{":0", "[::]:0", "192.0.2.1:7070"} {
		if r := w.want(cli.ExitError, "console", "--addr", addr, "--broker", "mem://orders", "--subscription", "mem://orders/billing"); !strings.Contains(r.errout, "not a loopback address") {
			t.Errorf("--addr %s: stderr %q", addr, r.errout)
		}
	}
	w.want(cli.ExitError, "console", "--addr", "0.0.0.0:0", "--token", "short", "--broker", "mem://orders", "--subscription", "mem://orders/billing")
}

// post sends a form without the browser.
func post(t *testing.T, u string, form url.Values, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func get(t *testing.T, u string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if h := header["Host"]; h != "" {
		req.Host = h
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
