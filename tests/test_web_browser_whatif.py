"""The page's controls for the new capabilities, in a real browser: what-if hardware ("What if the chip had"),
speculative decoding on the overview and the hyperbola, the sensitivity (tornado) tab, and the 24 px checkbox on a
desktop. Skipped like tests/test_web_browser.py without playwright or chromium."""
from __future__ import annotations

from test_web_browser import base_url, browser, renders, settled, wait  # noqa: F401  (fixtures and helpers)
from test_web_browser_use import card, error_text, open_tab, page, title, usd  # noqa: F401


def seconds(s: str) -> float:
    v, unit = s.split()
    return float(v) * {"s": 1.0, "ms": 1e-3, "\u00b5s": 1e-6}[unit]


def test_what_if_bandwidth_shows_the_catalog_figure_and_moves_every_serving_tab(page):
    open_tab(page, "?batch=64")
    assert page.get_attribute("#w_memory_bw_tbs", "placeholder") == "3.35"     # H100 SXM's catalog figure
    before = seconds(card(page, "overview", "decode_step_s"))
    n = renders(page)
    page.fill("#w_memory_bw_tbs", "6.7")
    settled(page, n)
    wait(page, "document.querySelector('#tab-overview h2.title').textContent.includes('what if')")
    assert "what if: memory_bw_tbs 6.7 TB/s (catalog 3.35)" in title(page, "overview")
    after = seconds(card(page, "overview", "decode_step_s"))
    assert 0.5 * before < after < before           # memory-bound: faster, but fixed per-step terms stay
    assert "w_memory_bw_tbs=6.7" in page.url
    n = renders(page)
    page.click(".tabs button[data-tab='hyperbola']")
    settled(page, n)
    assert "what if: memory_bw_tbs 6.7 TB/s" in title(page, "hyperbola")     # the tabs agree on the chip


def test_a_bad_what_if_figure_is_refused_in_place(page):
    open_tab(page, "?w_memory_bw_tbs=0")
    err = error_text(page, "overview")
    assert err.startswith("HBM bandwidth (TB/s): ") and "out of range" in err, err
    assert page.evaluate("document.querySelector('#w_memory_bw_tbs').classList.contains('invalid')")


def test_speculative_decoding_on_the_overview_and_the_hyperbola(page):
    open_tab(page, "?model=llama-3.1-70b&chips=8&sp_mode=draft&sp_draft=llama-3.2-1b&sp_acceptance=0.7")
    assert page.is_enabled("#sp_draft") and page.is_enabled("#sp_acceptance")
    plain = float(card(page, "overview", "output_tokens_per_s_per_user").replace(",", ""))
    spec = float(card(page, "overview", "spec_speedup").replace(",", ""))
    assert spec > 1.3 * plain, (spec, plain)        # batch 1: a memory-bound verify makes the drafted tokens cheap
    assert "draft Llama 3.2 1B, 4 per step, acceptance 0.7" in card(page, "overview", "spec_speedup", "sub")
    page.click("#tab-overview .card[data-card='spec_speedup'] button.why")
    assert "Leviathan" in page.locator("#why-tab-overview").inner_text()   # its own derivation
    n = renders(page)
    page.click(".tabs button[data-tab='hyperbola']")
    settled(page, n)
    assert card(page, "hyperbola", "spec", "label") == "speculative at batch 1"
    assert "speculative" in page.locator("#hyperbola-cost .legend").text_content()
    # the readout walks onto the speculative curve too
    svg = page.locator("#hyperbola-cost svg.chart")
    svg.focus()
    texts = set()
    for key in ("Home", "ArrowRight", "ArrowRight", "ArrowRight"):
        page.keyboard.press(key)
        texts.add(page.locator("#hyperbola-cost .readout").inner_text())
    assert any(t.startswith("speculative, batch ") for t in texts), texts


def test_speculation_off_hides_its_fields_and_a_missing_acceptance_names_its_field(page):
    open_tab(page, "")
    assert not page.is_enabled("#sp_draft") and not page.is_enabled("#sp_acceptance")
    n = renders(page)
    page.select_option("#sp_mode", "draft")
    wait(page, "!document.querySelector('#tab-overview .error').hidden")
    err = error_text(page, "overview")
    assert err.startswith("acceptance (0-1): missing"), err
    assert "--acceptance" not in err                  # the page's field, not the command line's flag
    page.fill("#sp_acceptance", "0.6")
    settled(page, n)
    wait(page, "document.querySelector('#tab-overview .error').hidden")
    assert "acceptance 0.6" in card(page, "overview", "spec_speedup", "sub")


def test_sensitivity_tab_draws_a_ranked_tornado_with_readouts(page):
    open_tab(page, "?tab=sensitivity&batch=64")
    assert error_text(page, "sensitivity") == ""
    assert "What moves $ per Mtok output (decode step)" in title(page, "sensitivity")
    base = usd(card(page, "sensitivity", "base"))
    assert base > 0
    top = card(page, "sensitivity", "top")
    svg = page.locator("#sensitivity-chart svg.chart")
    assert svg.get_attribute("aria-label").startswith("Tornado: what moves")
    labels = page.evaluate("Array.from(document.querySelectorAll('#sensitivity-chart text.axis-label')).slice(1)"
                           ".map((t) => t.textContent)")
    assert labels[0] == top                            # ranked: the largest swing first
    svg.focus()
    page.keyboard.press("Home")
    first = page.locator("#sensitivity-chart .readout").inner_text()
    assert first.startswith(top + " ") and "swing" in first, first
    page.keyboard.press("ArrowDown")
    assert page.locator("#sensitivity-chart .readout").inner_text().startswith(labels[1] + " ")
    n = renders(page)
    page.select_option("#sn_metric", "decode_step_s")
    settled(page, n)
    assert "What moves decode step (s)" in title(page, "sensitivity")
    assert card(page, "sensitivity", "top") != "price_usd_per_hour"        # a time does not depend on the price


def test_the_checkbox_is_a_24_px_target_on_a_desktop(page):
    open_tab(page, "")
    box = page.locator("#peak").bounding_box()
    assert box["width"] >= 24 and box["height"] >= 24, box


def zoom_of(page, box: str) -> tuple[float, float] | None:
    """The x range a chart shows (its data-zoom, "LO-HI"); None when it shows every point."""
    z = page.locator(box).get_attribute("data-zoom")
    return None if z in (None, "all") else tuple(float(v) for v in z.split("-"))


def test_a_log_axis_zooms_by_keys_on_the_chart_and_by_wheel_around_the_pointer(page):
    """+ and - on the focused chart narrow and widen the axis around its middle; ctrl + wheel (a trackpad's pinch)
    zooms around the pointer, and so does a plain wheel once the chart has focus; over an unfocused chart a plain
    wheel leaves the axis alone (it scrolls the page)."""
    open_tab(page, "?tab=hyperbola")
    ticks = lambda: page.locator("#hyperbola-cost svg text.tick").all_inner_texts()  # noqa: E731
    before = ticks()
    svg = page.locator("#hyperbola-cost svg.chart")
    svg.focus()
    page.keyboard.press("+")
    zoomed = ticks()
    assert zoomed != before
    assert page.evaluate("document.activeElement.matches('#hyperbola-cost svg.chart')")   # focus stays on the chart
    lo, hi = zoom_of(page, "#hyperbola-cost")
    page.keyboard.press("-")
    assert ticks() == before and zoom_of(page, "#hyperbola-cost") is None
    page.evaluate("document.activeElement.blur()")
    b = svg.bounding_box()
    # the frame's left edge (margin 70 of the 720-wide drawing) plus a tenth of the frame: near the smallest batch
    x = b["x"] + b["width"] * (70 + 0.1 * 630) / 720
    page.mouse.move(x, b["y"] + b["height"] / 2)
    page.mouse.wheel(0, -100)
    assert ticks() == before                                   # unfocused: the wheel is the page's
    page.keyboard.down("Control")
    page.mouse.wheel(0, -100)
    page.keyboard.up("Control")
    wait(page, "document.querySelectorAll('#hyperbola-cost svg text.tick').length > 0")
    zlo, zhi = zoom_of(page, "#hyperbola-cost")
    # half the decades, around the pointer: the view keeps the small batches (it starts below the middle zoom's start)
    assert abs((zhi / zlo) - (hi / lo)) / (hi / lo) < 0.02, ((zlo, zhi), (lo, hi))
    assert zlo < lo
    page.locator("#hyperbola-cost svg.chart").focus()
    page.mouse.wheel(0, 100)                                   # focused: a plain wheel zooms back out
    wait(page, "document.querySelector('#hyperbola-cost').dataset.zoom === 'all'")
    assert ticks() == before
