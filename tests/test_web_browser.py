"""`tokenmath serve` in a real browser: Debian's chromium driven headless by playwright (no browser download).

Needs the `playwright` Python package (pip install ".[browser]") and /usr/bin/chromium (apt-get install chromium).
Without them the test is skipped with the reason, unless TOKENMATH_REQUIRE_BROWSER=1 (CI), where it fails instead.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tokenmath.faces.web.server import start_in_thread

CHROMIUM = os.environ.get("TOKENMATH_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--disable-features=Translate,MediaRouter",
         "--metrics-recording-only", "--no-default-browser-check"]
REQUIRE = os.environ.get("TOKENMATH_REQUIRE_BROWSER") == "1"


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed (pip install '.[browser]')"
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return f"no chromium at {CHROMIUM} (apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def browser():
    why = _missing()
    if why:
        if REQUIRE:
            pytest.fail(f"TOKENMATH_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:   # playwright gives the browser a fresh temporary profile
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def base_url():
    srv, thread = start_in_thread("127.0.0.1", 0)
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def wait(page, expr: str, timeout: float = 30.0):
    """Poll a JS expression (page.evaluate works under the page's CSP; wait_for_function's string eval does not)."""
    t0 = time.time()
    last = None
    while time.time() - t0 < timeout:
        last = page.evaluate(expr)
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {expr} (last value {last!r})")


def open_tab(p, query: str) -> str:
    """Open the page on `query` (its query string, with or without the leading '?') and wait until its panel has
    drawn or shown its error; the tab's name."""
    p.goto(p.base + "?" + query.lstrip("?"))
    tab = re.search(r"tab=(\w+)", query)
    tab = tab.group(1) if tab else "overview"
    wait(p, f"Number(document.querySelector('#main').dataset.renders) > 0 || "
            f"!document.querySelector('#tab-{tab} .error').hidden", 60)
    wait(p, "document.querySelector('#main').dataset.pending === '0'", 60)
    return tab


def settled(page, renders_before: int):
    """Wait until a new render happened and no request is in flight; return the render count."""
    wait(page, f"Number(document.querySelector('#main').dataset.renders) > {renders_before}")
    wait(page, "document.querySelector('#main').dataset.pending === '0'")
    return renders(page)


def renders(page) -> int:
    return int(page.evaluate("document.querySelector('#main').dataset.renders"))


def card(page, key: str) -> str:
    return page.locator(f"#tab-overview .card[data-card='{key}'] .value").inner_text()


def visible_error(page, tab: str) -> str:
    return page.evaluate(f"(() => {{ const e = document.querySelector('#tab-{tab} .error'); "
                         f"return e && !e.hidden ? e.textContent : ''; }})()")


def test_page_in_chromium(browser, base_url, fixtures):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(base_url) else None)

    # 1. load: the default model renders numbers and the roofline
    page.goto(base_url)
    n = settled(page, 0)
    assert "Llama 3.1 8B" in page.locator("#tab-overview h2.title").inner_text()
    decode0 = card(page, "decode_step_s")
    svg0 = page.inner_html("#roofline")
    assert page.locator("#roofline svg .series.decode .dot").count() >= 3
    assert page.locator("#roofline svg .series.prefill .dot").count() >= 3
    assert "ridge" in svg0

    # 2. change the model: numbers and chart change, the URL follows
    page.select_option("#model", "qwen3-8b")
    n = settled(page, n)
    wait(page, "document.querySelector('#tab-overview h2.title').textContent.includes('Qwen3')")
    assert card(page, "decode_step_s") != decode0
    assert page.inner_html("#roofline") != svg0
    assert parse_qs(urlsplit(page.url).query)["model"] == ["qwen3-8b"]

    # 3. change the batch: throughput and the decode points move
    decode1, tps1, svg1 = card(page, "decode_step_s"), card(page, "output_tokens_per_s"), page.inner_html("#roofline")
    page.fill("#batch", "32")
    n = settled(page, n)
    assert "batch 32" in page.locator("#tab-overview h2.title").inner_text()
    assert card(page, "output_tokens_per_s") != tps1 and card(page, "decode_step_s") != decode1
    assert page.inner_html("#roofline") != svg1
    assert parse_qs(urlsplit(page.url).query)["batch"] == ["32"]

    # 4. a headline number expands into its derivation (the --explain text)
    page.click("#tab-overview .card[data-card='decode_step_s'] button.why")
    why = page.locator("#tab-overview .card-why").inner_text()
    assert "Decode step" in why and "sum of per-op max(compute, memory)" in why
    assert "napkin floor" in page.locator("#tab-overview .derivation pre").text_content()

    # 5. upload a config.json: it becomes the model, and its numbers match the catalog's Llama 3.1 8B
    page.set_input_files("#upload", str(Path(fixtures) / "Llama-3.1-8B.json"))
    n = settled(page, n)
    wait(page, "document.querySelector('#model').value.startsWith('upload:')")
    assert "Llama-3.1-8B.json" in page.locator("#tab-overview h2.title").inner_text()
    uploaded = card(page, "decode_step_s")
    page.select_option("#model", "llama-3.1-8b")
    n = settled(page, n)
    assert card(page, "decode_step_s") == uploaded

    # 6. the batch slider moves the batch (powers of two)
    page.select_option("#model", "mistral-7b")
    n = settled(page, n)
    page.evaluate("(() => { const s = document.querySelector('#batch-slider'); s.value = '4'; "
                  "s.dispatchEvent(new Event('input', {bubbles: true})); })()")
    n = settled(page, n)
    assert page.input_value("#batch") == "16" and "batch 16" in page.locator("#tab-overview h2.title").inner_text()

    # 7. every other panel renders its chart without an error
    for tab, chart in (("hyperbola", "#hyperbola-cost svg"), ("pareto", "#pareto-chart svg"),
                       ("simulate", "#simulate-cdf svg"), ("context", "#context-step svg"), ("prices", "#prices-chart svg"),
                       ("deduce", "#deduce-chart svg"), ("train", "#overtrain-chart svg"),
                       ("sensitivity", "#sensitivity-chart svg")):
        page.click(f".tabs button[data-tab='{tab}']")
        wait(page, f"!document.querySelector('#tab-{tab}').hidden")
        wait(page, f"document.querySelector('{chart}') !== null || "
                   f"!document.querySelector('#tab-{tab} .error').hidden", timeout=60)
        wait(page, "document.querySelector('#main').dataset.pending === '0'", timeout=60)
        assert visible_error(page, tab) == "", (tab, visible_error(page, tab))
        assert page.locator(f"#tab-{tab} .cards .card").count() >= 2, tab
        assert page.locator(f"#tab-{tab} .derivation pre").first.text_content().strip(), tab
    assert page.locator("#train-breakdown svg").count() == 1
    assert page.locator("#simulate-queue svg").count() == 1 and page.locator("#simulate-kv svg").count() == 1
    assert page.locator("#tab-simulate .card[data-card='goodput']").count() == 1
    assert page.locator("#tab-train .ot-cards .card").count() == 4

    # 7b. the agents tab: one bar per system (HBM only .. + NVMe), its table and derivation, and the command line
    # that asks the same question; a new speed per user recomputes it and moves the command line with it
    page.click(".tabs button[data-tab='agents']")
    wait(page, "!document.querySelector('#tab-agents').hidden")
    wait(page, "document.querySelector('#agents-chart svg') !== null || "
               "!document.querySelector('#tab-agents .error').hidden", timeout=60)
    wait(page, "document.querySelector('#main').dataset.pending === '0'", timeout=60)
    assert visible_error(page, "agents") == ""
    cli = page.locator("#tab-agents code.cli").inner_text()
    assert cli.startswith("tokenmath agents --model ") and "--systems " in cli
    systems = cli.split("--systems ")[1].split()[0].split(",")
    assert page.locator("#tab-agents .ops tbody tr").count() == len(systems) >= 1
    assert "sessions" in page.locator("#tab-agents .derivation pre").text_content()
    r = renders(page)
    page.fill("#a_speed", "50")
    settled(page, r)
    assert "--min-tokens-per-s-per-user 50" in page.locator("#tab-agents code.cli").inner_text()
    assert "50 tokens/s per user" in page.locator("#tab-agents h2.title").inner_text()

    # 8. the deduce form recomputes on input; a bad price is answered in place, naming the field
    page.click(".tabs button[data-tab='deduce']")
    before = page.locator("#tab-deduce .card[data-card='active'] .value").inner_text()
    r = renders(page)
    page.fill("#input_price", "2.5")
    page.fill("#output_price", "10")
    settled(page, r)
    assert page.locator("#tab-deduce .card[data-card='active'] .value").inner_text() != before

    # 9. the URL is the view: a new page opened on it shows the same state (uploads come back from localStorage)
    page.click(".tabs button[data-tab='overview']")
    page.set_input_files("#upload", str(Path(fixtures) / "Qwen3-8B.json"))
    n = settled(page, renders(page))
    wait(page, "document.querySelector('#model').value.startsWith('upload:')")
    shared = page.url
    decode_shared = card(page, "decode_step_s")
    page2 = context.new_page()
    page2.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page2.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page2.goto(shared)
    settled(page2, 0)
    assert page2.input_value("#batch") == "16"
    assert page2.input_value("#model") == page.input_value("#model")
    assert page2.locator("#tab-overview .card[data-card='decode_step_s'] .value").inner_text() == decode_shared

    assert not outside, f"requests left the server: {outside}"
    assert not problems, "\n".join(problems)
    context.close()


def test_bad_input_shows_the_field(browser, base_url):
    """An input the API refuses (422) is reported on the page with the field named and the input marked."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(base_url + "?chips=8&tp=3")
    wait(page, "!document.querySelector('#tab-overview .error').hidden")
    wait(page, "document.querySelector('#main').dataset.pending === '0'")
    msg = page.locator("#tab-overview .error").inner_text()
    assert msg.startswith("chips:") and "tp" in msg
    assert page.evaluate("document.querySelector('#chips').classList.contains('invalid')")
    page.fill("#tp", "8")
    settled(page, 0)
    assert visible_error(page, "overview") == ""
    assert not errors, errors
    page.close()
