package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromium finds a Chromium or Chrome binary. Without one the browser
// test is skipped, except in CI (CI=true), where the suite installs it and
// a missing browser is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("COMMITLAYER_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true and no Chromium found (chromium, chromium-browser, google-chrome or COMMITLAYER_CHROMIUM): the suite must install it")
	}
	t.Skip("no Chromium found (install chromium, or set COMMITLAYER_CHROMIUM); skipping the browser test")
	return ""
}

// browserConsole collects what a page reports as a problem: console
// errors and warnings, uncaught exceptions, and browser log entries (CSP
// violations, failed loads) at warning level or worse.
type browserConsole struct {
	mu     sync.Mutex
	errors []string
}

func (b *browserConsole) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errors = append(b.errors, s)
}

func (b *browserConsole) list() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

func newBrowser(t *testing.T) (context.Context, *browserConsole) {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // root in CI containers
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	bc := &browserConsole{}
	msgs := chromedp.Console(ctx) // subscribes now, before any page loads
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				bc.add(m.String() + " at " + m.URL)
			}
		}
	}()
	return ctx, bc
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

// A person logs in with the key, filters the actions to FAIL, opens the
// failed one and sees its id, FAIL and the finding's message, with no
// error in the browser's console (a CSP violation would be one).
func TestBrowser(t *testing.T) {
	ctx, bc := newBrowser(t)
	fx := newFixture(t)
	base := fx.srv.URL

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/console/actions"),
		chromedp.WaitVisible(chromedp.ID("api_key")),
		chromedp.SendKeys(chromedp.ID("api_key"), fx.key),
		chromedp.Submit(chromedp.ID("api_key")),
		chromedp.WaitVisible(chromedp.CSS(`form[aria-label="Filter actions"]`)),
	))
	require.Equal(t, "Actions · CommitLayer console", run(t, ctx, chromedp.Title()))
	require.Equal(t, base+"/console/actions", run(t, ctx, chromedp.Location()), "the login sent back to the page asked for")

	// Filter to FAIL with the form. The failed action is on the unfiltered
	// page too: wait for the filtered page to load, not for its link.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("status"), "FAIL"),
		chromedp.Click(chromedp.CSS(`form[aria-label="Filter actions"] button[type="submit"]`)),
	))
	// One expression, so the address and the loaded state are read from the
	// same document: reading the location first and the rows after could
	// count the unfiltered page's rows while it is being replaced.
	deadline := time.Now().Add(20 * time.Second)
	for !run(t, ctx, chromedp.Evaluate[bool](`location.search.includes("status=FAIL") && document.readyState === "complete"`)) {
		require.True(t, time.Now().Before(deadline), "the filter form did not load the filtered page")
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitReady("body"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/actions/`+fx.failID+`"]`)),
	))
	require.Equal(t, 1, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("main table tbody tr").length`)), "one FAIL")

	// Open it.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a[href="/console/actions/`+fx.failID+`"]`)),
		chromedp.WaitVisible(chromedp.ID("action-id")),
	))
	require.Equal(t, fx.failID, run(t, ctx, chromedp.Text(chromedp.ID("action-id"))))
	require.Equal(t, "FAIL", run(t, ctx, chromedp.Text(chromedp.CSS(`#verdict-status .badge`))))
	require.Equal(t, failMessage, run(t, ctx, chromedp.Text(chromedp.CSS(`.finding .message`))))
	dom := run(t, ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	require.Contains(t, dom, "ledger-po-7", "the evidence fact")
	require.NotContains(t, dom, fx.key)

	// The stylesheet applied (the CSP let it in): the badge is coloured.
	require.Equal(t, "rgb(179, 38, 30)", run(t, ctx, chromedp.Evaluate[string](
		`getComputedStyle(document.querySelector("#verdict-status .badge")).backgroundColor`)))

	// The overview renders its chart.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS(`figure.chart svg`))))
	require.Positive(t, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("figure.chart svg rect").length`)))

	// The browser's storage holds nothing; the cookie is not readable by
	// script.
	require.Equal(t, "{}{}", run(t, ctx, chromedp.Evaluate[string](`JSON.stringify(localStorage) + JSON.stringify(sessionStorage)`)))
	require.Empty(t, run(t, ctx, chromedp.Evaluate[string](`document.cookie`)), "HttpOnly")

	// Basic accessibility on every page: lang, one h1, labelled controls,
	// named buttons, links and charts, tables with headers, and text at
	// WCAG AA contrast (4.5:1) against its background.
	for _, path := range []string{"/console/", "/console/actions?status=FAIL", "/console/actions/" + fx.failID,
		"/console/contracts", "/console/contracts/send_payout", "/console/webhooks"} {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("main"))))
		problems := run(t, ctx, chromedp.Evaluate[[]string](a11yCheck))
		require.Empty(t, problems, path)
	}

	if dir := os.Getenv("COMMITLAYER_CONSOLE_SCREENSHOTS"); dir != "" {
		screenshots(t, ctx, fx, dir)
	}
	// Late events (a CSP report comes asynchronously) get a moment.
	require.NoError(t, chromedp.Do(ctx, chromedp.Sleep(300*time.Millisecond)))
	require.Empty(t, bc.list(), "the browser reported problems")
	fx.noKeyAnywhere(t)
}

// screenshots writes each page as a PNG into dir (docs/console/):
// COMMITLAYER_CONSOLE_SCREENSHOTS=$PWD/docs/console go test -run TestBrowser ./console/
func screenshots(t *testing.T, ctx context.Context, fx *fixture, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	shots := []struct{ name, path string }{
		{"overview", "/console/"},
		{"actions", "/console/actions?status=FAIL"},
		{"action", "/console/actions/" + fx.failID},
		{"contracts", "/console/contracts"},
		{"contract", "/console/contracts/send_payout"},
		{"webhooks", "/console/webhooks"},
	}
	for _, s := range shots {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(fx.srv.URL+s.path), chromedp.WaitVisible(chromedp.CSS("main"))), s.name)
		png := run(t, ctx, chromedp.CaptureScreenshot())
		require.NoError(t, os.WriteFile(filepath.Join(dir, s.name+".png"), png, 0o644))
	}
	// The login page, in a tab without the session.
	lctx, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	defer cancel()
	require.NoError(t, chromedp.Do(lctx, chromedp.Navigate(fx.srv.URL+"/console/login"), chromedp.WaitVisible(chromedp.ID("api_key"))))
	png := run(t, lctx, chromedp.CaptureScreenshot())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "login.png"), png, 0o644))
}

// a11yCheck returns the page's basic accessibility problems.
const a11yCheck = `(() => {
  const out = [];
  const short = el => el.outerHTML.slice(0, 100);
  if (!document.documentElement.lang) out.push("html has no lang");
  if (document.querySelectorAll("h1").length !== 1) out.push("not exactly one h1");
  if (!document.title) out.push("no title");
  for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
    if (!(el.labels && el.labels.length) && !el.getAttribute("aria-label")) out.push("unlabelled " + short(el));
  }
  for (const el of document.querySelectorAll("a, button")) {
    if (!el.textContent.trim() && !el.getAttribute("aria-label")) out.push("nameless " + short(el));
  }
  for (const el of document.querySelectorAll("svg")) {
    if (el.getAttribute("role") !== "img" || !el.getAttribute("aria-labelledby")) out.push("chart without a name");
  }
  for (const el of document.querySelectorAll("table")) {
    if (!el.querySelector("th")) out.push("table without headers");
  }
  const rgb = c => (c.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const bg = el => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || el.closest("svg") || !el.getClientRects().length) continue;
    const fg = rgb(getComputedStyle(el).color).slice(0, 3);
    if (fg.length !== 3) { out.push("cannot read the colour of " + short(el)); continue; }
    const [a, b] = [lum(fg), lum(bg(el))];
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) out.push("contrast " + ratio.toFixed(2) + " for " + JSON.stringify(n.textContent.trim().slice(0, 30)));
  }
  return out;
})()`
