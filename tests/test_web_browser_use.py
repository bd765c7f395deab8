"""The page as people use it (issue 21), in a real browser: Debian's chromium driven headless by playwright.

Each test is one complaint of a user, checked the way the user met it: state that holds (the hyperbola's batch, a
shared link to an upload), tabs that agree (one chip name, one meaning of blank chips and of batch; the hyperbola's
context the CLI's), messages in the page's words, a readout on every chart by mouse, touch and keys, the phone at
390 x 844 and the keyboard. Skipped like tests/test_web_browser.py without playwright or chromium (failing instead under
TOKENMATH_REQUIRE_BROWSER=1, as in CI).
"""
from __future__ import annotations

import re
import pytest

from test_web_browser import base_url, browser, open_tab, renders, settled, wait  # noqa: F401  (fixtures and helpers)

DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}
TABS = ("overview", "hyperbola", "pareto", "simulate", "context", "prices", "sensitivity", "deduce", "train")


@pytest.fixture()
def page(browser, base_url):  # noqa: F811
    """A fresh desktop page; fails the test on any page error or console error/warning."""
    context = browser.new_context(viewport=DESKTOP)
    p = context.new_page()
    problems: list[str] = []
    p.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    p.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    p.base = base_url
    yield p
    context.close()
    assert not [x for x in problems if "422" not in x], problems   # a refused input is answered in place, not logged


def card(p, tab: str, key: str, part: str = "value") -> str:
    return p.locator(f"#tab-{tab} .card[data-card='{key}'] .{part}").first.inner_text()


def error_text(p, tab: str) -> str:
    return p.evaluate(f"(() => {{ const e = document.querySelector('#tab-{tab} .error'); "
                      f"return e && !e.hidden ? e.textContent : ''; }})()")


def title(p, tab: str) -> str:
    return p.locator(f"#tab-{tab} h2.title").first.inner_text()


def usd(s: str) -> float:
    return float(s.replace("$", "").replace(",", ""))


# ---- 1. state that holds ----------------------------------------------------------------------------------------

def test_hyperbola_follows_a_typed_batch_across_tabs(page):
    """Typing a batch on the hyperbola tab moves its card and its marker, even though the request (which has no batch)
    is unchanged; leaving the tab and coming back keeps the new batch."""
    open_tab(page, "?tab=hyperbola")
    n = renders(page)
    page.fill("#batch", "64")
    n = settled(page, n)
    assert card(page, "hyperbola", "current", "label").startswith("at batch 64")
    assert "your batch 64" in page.locator("#hyperbola-cost .mine").text_content()
    page.fill("#batch", "128")
    n = settled(page, n)
    assert card(page, "hyperbola", "current", "label").startswith("at batch 128")
    page.click(".tabs button[data-tab='overview']")
    n = settled(page, n)
    assert "batch 128" in title(page, "overview")
    page.click(".tabs button[data-tab='hyperbola']")
    wait(page, "!document.querySelector('#tab-hyperbola').hidden && document.querySelector('#main').dataset.pending === '0'")
    assert card(page, "hyperbola", "current", "label").startswith("at batch 128")
    assert "your batch 128" in page.locator("#hyperbola-cost .mine").text_content()


def test_link_to_an_upload_this_browser_lacks_says_so_and_keeps_saying_it(page):
    """A shared link naming an upload opens, in a fresh browser, on the default model with a notice that stays."""
    open_tab(page, "?model=upload:0123456789abcdef&batch=8")
    notice = page.locator("#notice")
    assert notice.is_visible()
    text = notice.inner_text()
    assert "upload:0123456789abcdef" in text and "upload that config.json again" in text
    assert "Llama 3.1 8B" in text and "Llama 3.1 8B" in title(page, "overview")
    # later renders leave it in place. The render count is read before the edit, and the test waits for the state it
    # asserts (the title at batch 16): read after the edit, a render that already landed under load was never seen
    n = renders(page)
    page.fill("#batch", "16")
    settled(page, n)
    wait(page, "document.querySelector('#tab-overview h2.title').textContent.includes('batch 16,')")
    assert notice.is_visible() and notice.inner_text() == text
    n = renders(page)
    page.select_option("#model", "qwen3-8b")   # choosing a model answers it
    wait(page, "document.querySelector('#notice').hidden")
    settled(page, n)
    assert not notice.is_visible() and "Llama" not in title(page, "overview")


# ---- 4. tabs that agree -------------------------------------------------------------------------------------------

def test_tabs_name_the_chip_alike_and_read_blank_chips_alike(page):
    """Every serving tab names the chip by its catalog name and, with chips blank, works on the same chip count."""
    open_tab(page, "?hardware=h200")
    first = title(page, "overview")
    m = re.search(r" on (\d+) \u00d7 (.+?) \(", first)
    assert m, first
    chips, name = m.group(1), m.group(2)
    assert name == "NVIDIA H200 SXM 141GB"
    for tab in ("hyperbola", "pareto", "context", "prices"):
        n = renders(page)
        page.click(f".tabs button[data-tab='{tab}']")
        settled(page, n)
        t = title(page, tab)
        assert f" on {chips} \u00d7 {name}" in t, (tab, t)
        assert "h200," not in t and "\u00d7 h200" not in t, (tab, t)


def test_context_of_the_hyperbola_and_of_the_context_tab(page):
    """The KV & context tab reads input + output (1024 + 256: 1,280 tokens); the hyperbola its own context field,
    2,048 tokens by default as `tokenmath hyperbola --context` (so the page and the CLI give the same floor), or one
    typed."""
    open_tab(page, "?tab=hyperbola&input_len=1024&output_len=256")
    assert "2,048 tokens of context" in title(page, "hyperbola")
    n = renders(page)
    page.click(".tabs button[data-tab='context']")
    settled(page, n)
    assert "at 1,280" in card(page, "context", "kv_bytes_per_token", "sub")
    open_tab(page, "?tab=hyperbola&h_context=1280")
    assert "1,280 tokens of context" in title(page, "hyperbola")


def test_input_vs_output_answers_what_the_cli_answers(page):
    """The input-vs-output tab asks `tokenmath prices`'s question with its defaults (issue 39 item 2: it used the
    overview's batch 1 and claimed a 246x output/input ratio where the CLI gives 1.3-30x): blank batch, the largest that
    fits at each context; a batch typed in its own field gives, at batch 1, the overview's $ per Mtok output."""
    from tokenmath.analyses.serving.input_vs_output import prices
    open_tab(page, "?tab=prices&model=llama-3.1-70b&hardware=h100-sxm&chips=8")
    cli = prices("llama-3.1-70b", "h100-sxm", chips=8, contexts=(256, 1024, 4096, 16384, 65536, 131072),
                 output_len=256, engine="vllm")
    row = next(r for r in cli.to_dict()["rows"] if r["input_len"] == 1024)
    shown = float(card(page, "prices", "ratio").rstrip("\u00d7"))
    assert shown == pytest.approx(row["output_input_ratio"], rel=0.01) and shown < 30      # not 246x
    assert "(the largest that fits)" in card(page, "prices", "input", "sub")
    assert "tokenmath prices --model llama-3.1-70b --hardware h100-sxm --chips 8" in \
        page.locator("#tab-prices .cli").inner_text()
    overview_url = "?batch=1&model=llama-3.1-70b&hardware=h100-sxm&chips=8"
    open_tab(page, overview_url)
    overview = usd(card(page, "overview", "cost_per_mtok_output_usd"))
    open_tab(page, "?tab=prices&p_batch=1&model=llama-3.1-70b&hardware=h100-sxm&chips=8")
    assert usd(card(page, "prices", "output")) == overview
    assert "batch 1 (the batch above)" in card(page, "prices", "input", "sub")
    assert "--batch 1" in page.locator("#tab-prices .cli").inner_text()
    assert card(page, "prices", "cached", "sub")   # the cached price says where its KV waits and what it costs


# ---- 5. messages in the page's words -------------------------------------------------------------------------------

@pytest.mark.parametrize("typed", ["12ab", "abc"])
def test_a_malformed_number_is_refused_not_guessed(page, typed):
    """"12ab" is not read as 12, "abc" not as the default: the panel names the field and marks it."""
    open_tab(page, "?tab=hyperbola")
    page.fill("#h_context", typed)
    wait(page, "!document.querySelector('#tab-hyperbola .error').hidden")
    msg = error_text(page, "hyperbola")
    assert msg.startswith("context (tokens):") and f'"{typed}" is not a whole number' in msg
    assert page.evaluate("document.querySelector('#h_context').classList.contains('invalid')")
    n = renders(page)
    page.fill("#h_context", "2304")
    settled(page, n)
    assert error_text(page, "hyperbola") == "" and "2,304 tokens of context" in title(page, "hyperbola")


def test_chips_that_split_badly_are_blamed_on_chips_not_on_an_untyped_tp(page):
    open_tab(page, "?chips=3")
    msg = error_text(page, "overview")
    # the engine's own refusal names chips (mapping/layout.make_layout); the page puts its flags in field words
    assert msg.startswith("chips: 3 chips spread by tensor parallelism make tp=3"), msg
    assert "chips = 1 or 2 or 4, or add tp = 1" in msg and "--" not in msg
    assert page.evaluate("document.querySelector('#chips').classList.contains('invalid')")


def test_advice_names_the_fields_of_the_page_not_command_line_flags(page):
    """Llama 3.1 70B on one H100 does not fit; the advice says which field to change, in the page's words."""
    open_tab(page, "?model=llama-3.1-70b&chips=1")
    advice = page.locator("#tab-overview .notes .advice").all_inner_texts()
    assert any("weights = fp8 fits" in a for a in advice), advice
    assert not any("--" in a for a in advice), advice


def test_deduce_refusal_speaks_of_page_fields(page):
    open_tab(page, "?tab=deduce&input_price=1000&output_price=5000")
    msg = error_text(page, "deduce")
    assert msg.startswith("input $/Mtok:"), msg
    assert "--" not in msg, msg


def test_derivations_wrap_instead_of_scrolling_sideways(page):
    open_tab(page, "?tab=hyperbola")
    overflow = page.evaluate("(() => { const p = document.querySelector('#tab-hyperbola .derivation pre'); "
                             "return p.scrollWidth - p.clientWidth; })()")
    assert overflow <= 1


# ---- 2. readouts on every chart ------------------------------------------------------------------------------------

def charts_of(p, tab: str) -> list[str]:
    return p.evaluate(f"Array.from(document.querySelectorAll('#tab-{tab} .chart-box')).filter((b) => "
                      f"b.querySelector('svg.chart')).map((b) => '#' + b.id)")


def test_every_chart_reads_out_by_mouse_and_keys(page):
    """On every chart of every tab, pointing at it shows the nearest point's numbers, and the arrow keys step through
    the points (the readout's text changes); every chart has a name of its own."""
    seen = 0
    for tab in TABS:
        open_tab(page, f"?tab={tab}&batch=64")
        assert error_text(page, tab) == "", (tab, error_text(page, tab))
        boxes = charts_of(page, tab)
        assert boxes, tab
        for box in boxes:
            svg = page.locator(f"{box} svg.chart")
            name = svg.get_attribute("aria-label")
            assert name and not name.startswith("chart"), (box, name)
            svg.scroll_into_view_if_needed()
            b = svg.bounding_box()
            page.mouse.move(b["x"] + b["width"] * 0.5, b["y"] + b["height"] * 0.5)
            readout = page.locator(f"{box} .readout")
            wait(page, f"!document.querySelector('{box} .readout').hidden", 5)
            first = readout.inner_text()
            assert re.search(r"\d", first), (box, first)
            svg.focus()
            page.keyboard.press("Home")
            home = readout.inner_text()
            page.keyboard.press("End")
            assert readout.inner_text() != home or box in ("#train-breakdown",), box
            page.keyboard.press("Escape")
            assert not readout.is_visible()
            seen += 1
    assert seen >= 14


def test_hyperbola_marks_your_batch_the_largest_that_fits_the_critical_batch_and_an_unreached_floor(page):
    open_tab(page, "?tab=hyperbola&batch=64")
    svg = "#hyperbola-cost svg"
    max_batch = card(page, "hyperbola", "max_batch")
    assert page.locator(f"{svg} .line-label.fits").text_content() == f"largest that fits {max_batch}"
    assert page.locator(f"{svg} .vline.critical").count() == 1
    assert page.locator(f"{svg} .hline.floor").count() == 1
    floor = card(page, "hyperbola", "floor", "sub")
    # the floor is the B -> infinity limit; when the batches that fit stop short of it the card names the cheapest
    # (not always the largest that fits: tile quantization makes the cost a staircase in the batch, see
    # docs/tile_quantization.md)
    m = re.search(r"the cheapest, batch ([\d,]+), costs \$([\d.]+)", floor)
    if m:
        assert 1 <= int(m.group(1).replace(",", "")) <= int(max_batch.replace(",", ""))
        assert usd(m.group(2)) > usd(card(page, "hyperbola", "floor"))
    # the keyboard starts on your point
    page.locator(svg).focus()
    assert page.locator("#hyperbola-cost .readout").inner_text().startswith("your batch: batch 64:")


def test_pareto_points_tell_their_layout_and_your_configuration_is_marked(page):
    open_tab(page, "?tab=pareto&batch=16")
    assert page.locator("#pareto-chart .mine").count() == 1
    page.locator("#pareto-chart svg").focus()
    you = page.locator("#pareto-chart .readout").inner_text()
    assert you.startswith("your configuration: tp 1 pp 1 ep 1 dp 1, batch 16:"), you
    page.keyboard.press("Home")
    said = []
    for _ in range(60):      # the points in order of speed per user: static batches among the engine's curves
        said.append(page.locator("#pareto-chart .readout").inner_text())
        page.keyboard.press("ArrowRight")
    assert any(re.match(r"tp=\d+ pp=\d+ ep=\d+ dp=\d+, batch [\d,]+: .* tok/s/chip", x) for x in said), said[:5]
    assert any(re.match(r"tp=\d+ pp=\d+ ep=\d+ dp=\d+, \d+ users: ", x) for x in said), said[:5]


def test_zoom_narrows_a_decades_wide_axis_and_shows_all_again(page):
    open_tab(page, "?tab=hyperbola")
    ticks = lambda: page.locator("#hyperbola-cost svg text.tick").all_inner_texts()  # noqa: E731
    before = ticks()
    page.click("#hyperbola-cost .zoom button[data-z='0.5']")
    assert ticks() != before
    assert page.evaluate("document.activeElement.dataset.z") == "0.5"   # focus stays on the button
    page.click("#hyperbola-cost .zoom button[data-z='0']")
    assert ticks() == before


# ---- 3. the phone --------------------------------------------------------------------------------------------------

@pytest.fixture()
def phone(browser, base_url):  # noqa: F811
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True, device_scale_factor=2)
    p = context.new_page()
    p.base = base_url
    yield p
    context.close()


def test_phone_results_first_one_tab_strip_no_overflow_and_tap_targets(phone):
    for tab in ("overview", "hyperbola", "pareto", "simulate", "sensitivity", "train"):
        open_tab(phone, f"?tab={tab}")
        # results before inputs: the panel's first cards start inside the first screen
        top = phone.evaluate(f"document.querySelector('#tab-{tab} .cards').getBoundingClientRect().top")
        assert top < PHONE["height"] - 100, (tab, top)
        assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], tab
        rows = phone.evaluate("new Set(Array.from(document.querySelectorAll('.tabs button')).map((b) => b.offsetTop)).size")
        assert rows == 1, tab
        small = phone.evaluate("""Array.from(document.querySelectorAll('button, input, select, summary'))
            .filter((e) => e.offsetParent !== null).map((e) => [e.id || e.className || e.tagName, e.getBoundingClientRect()])
            .filter(([_, r]) => r.width > 0 && (r.height < 24 || r.width < 24)).map(([n, r]) => `${n} ${r.width}x${r.height}`)""")
        assert not small, (tab, small)
        # chart text stays readable: 11 px ticks are not scaled down to 5 px
        tick = phone.evaluate(f"(() => {{ const t = document.querySelector('#tab-{tab} svg.chart text.tick'); "
                              f"return t ? t.getBoundingClientRect().height : 99; }})()")
        assert tick >= 10, (tab, tick)


def test_phone_editing_an_input_shows_its_result_and_its_error(phone):
    """Scrolled down to the inputs, the sticky summary shows the new result, and an error, without scrolling up."""
    open_tab(phone, "?tab=hyperbola")
    phone.locator("#batch").scroll_into_view_if_needed()
    n = renders(phone)
    phone.fill("#batch", "32")
    settled(phone, n)
    summary = phone.locator("#summary")
    wait(phone, "!document.querySelector('#summary').hidden", 5)
    assert summary.is_visible() and "at batch 32" in summary.inner_text()
    phone.locator("#chips").scroll_into_view_if_needed()       # an input on the left that the hyperbola reads
    phone.fill("#chips", "12ab")
    wait(phone, "document.querySelector('#summary').classList.contains('bad')")
    assert summary.is_visible() and "chips" in summary.inner_text()
    box = summary.bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= PHONE["height"] + 1


@pytest.mark.parametrize("tab, box, says", [("pareto", "#pareto-chart", "tok/s/chip"),
                                            ("overview", "#roofline", "FLOP/B"),
                                            ("hyperbola", "#hyperbola-cost", "/Mtok output"),
                                            ("prices", "#prices-chart", "$"),
                                            ("simulate", "#simulate-sweep-tput", "tok/s per chip")])
def test_phone_tap_reads_a_chart(phone, tab, box, says):
    open_tab(phone, f"?tab={tab}")
    svg = phone.locator(f"{box} svg")
    svg.scroll_into_view_if_needed()
    b = svg.bounding_box()
    phone.touchscreen.tap(b["x"] + b["width"] * 0.6, b["y"] + b["height"] * 0.5)
    wait(phone, f"!document.querySelector('{box} .readout').hidden", 5)
    said = phone.locator(f"{box} .readout").inner_text()
    assert says in said, said
    r = phone.locator(f"{box} .readout").bounding_box()   # the readout stays on the screen
    assert r["x"] >= 0 and r["x"] + r["width"] <= 390 + 1, r


# ---- 6. keyboard and names -----------------------------------------------------------------------------------------

def test_tabs_answer_arrow_keys_and_name_their_panels(page):
    open_tab(page, "")
    first = page.locator(".tabs button[data-tab='overview']")
    assert first.get_attribute("aria-controls") == "tab-overview"
    assert page.get_attribute("#tab-overview", "aria-labelledby") == first.get_attribute("id")
    first.focus()
    page.keyboard.press("ArrowRight")
    wait(page, "!document.querySelector('#tab-hyperbola').hidden")
    assert page.evaluate("document.activeElement.dataset.tab") == "hyperbola"
    assert page.get_attribute(".tabs button[data-tab='hyperbola']", "aria-selected") == "true"
    page.keyboard.press("End")        # the last tab
    wait(page, "!document.querySelector('#tab-agents').hidden")
    page.keyboard.press("ArrowRight")    # wraps around
    wait(page, "!document.querySelector('#tab-overview').hidden")
    assert [page.get_attribute(f".tabs button[data-tab='{t}']", "tabindex") for t in ("overview", "agents")] == ["0", "-1"]


def test_derivation_buttons_have_names_of_their_own(page):
    open_tab(page, "")
    names = page.evaluate("Array.from(document.querySelectorAll('#tab-overview button.why')).map((b) => "
                          "b.getAttribute('aria-label'))")
    assert len(names) >= 6 and len(set(names)) == len(names)
    assert "derivation of decode step" in names


def test_body_text_is_at_least_13_px(page):
    open_tab(page, "")
    sizes = page.evaluate("['.hint', '.card .label', '.card .sub', 'label'].map((s) => "
                          "parseFloat(getComputedStyle(document.querySelector(s)).fontSize))")
    assert min(sizes) >= 13, sizes


def test_pareto_chart_labels_name_each_point(base_url):  # noqa: F811
    """The API side of the pareto readout: each plotted point comes with its layout and batch."""
    import json
    import urllib.request
    body = json.load(urllib.request.urlopen(base_url + "api/pareto?chips=2"))
    pts, labels = body["chart"]["points"], body["chart"]["labels"]
    assert len(pts) == len(labels) > 0
    by_point = {(p["output_tokens_per_s_per_user"], p["output_tokens_per_s_per_chip"]): p for p in body["frontier"]}
    matched = 0
    for (x, y), (layout, batch, cost) in zip(pts, labels):
        assert re.fullmatch(r"tp=\d+ pp=\d+ ep=\d+ dp=\d+", layout) and batch >= 1
        if (x, y) in by_point:       # a frontier point: the label agrees with the frontier's own record
            assert (by_point[(x, y)]["layout"], by_point[(x, y)]["batch"]) == (layout, batch)
            matched += 1
    assert matched >= 1


def test_command_line_flags_become_the_page_s_field_names(page):
    """Words.web on the analyses' messages that name flags: each becomes a field of the page or says where the option
    lives; a command in backticks is left as it is."""
    open_tab(page, "")
    cases = {
        "--weight-dtype fp8 fits (up to batch 9 at this context)": "weights = fp8 fits (up to batch 9 at this context)",
        "--kv-dtype fp8 fits (up to batch 12)": "KV cache = fp8 fits (up to batch 12)",
        "--batch max runs 354": "batch = max runs 354",
        "add chips or use a smaller --weight-dtype/--kv-dtype": "add chips or use a smaller weights/KV cache",
        "widen the priors (e.g. --noise)": "widen the priors (e.g. the JSON API's noise parameter)",
        "chips cheaper than the --chip-cost range": "chips cheaper than the JSON API's chip_cost range",
        "--zero 3 --recompute full fits": "ZeRO = 3 recompute = full fits",
        "--balanced-stages --schedule interleaved --virtual-stages 8 --recompute none fits":
            "the command line's --balanced-stages the command line's --schedule interleaved the command line's "
            "--virtual-stages 8 recompute = none fits",
        "raise --tp, --pp or --cp, or lower --micro-batch / --seq-len":
            "raise tp, pp or cp, or lower micro-batch / sequence length",
        "(`tokenmath train --search --chips N` ranks them)": "(`tokenmath train --search --chips N` ranks them)",
    }
    got = page.evaluate("(xs) => xs.map((x) => Words.web(x))", list(cases))
    assert got == list(cases.values())


def test_a_new_batch_moves_your_pareto_point_without_searching_the_layouts_again(page):
    """The pareto search does not depend on the batch: a new batch asks /api/infer for your point and redraws."""
    open_tab(page, "?tab=pareto&batch=16")
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url.split("/api/")[1].split("?")[0]) if "/api/" in r.url else None)
    n = renders(page)
    page.fill("#batch", "64")
    settled(page, n)
    assert asked == ["infer"], asked
    page.locator("#pareto-chart svg").focus()
    assert ", batch 64:" in page.locator("#pareto-chart .readout").inner_text()


def test_batch_max_means_the_largest_that_fits_on_the_context_tab_too(page):
    open_tab(page, "?batch=max")
    b = re.search(r"batch ([\d,]+),", title(page, "overview")).group(1)
    n = renders(page)
    page.click(".tabs button[data-tab='context']")
    settled(page, n)
    assert title(page, "context").split(" \u2014 ")[0].endswith(f"batch {b}"), (b, title(page, "context"))


def test_input_vs_output_cards_follow_the_input_length_even_when_the_request_is_unchanged(page):
    """4,096 is one of the contexts the tab always asks for: typing it changes no request, yet the cards must move."""
    open_tab(page, "?tab=prices")
    assert card(page, "prices", "input", "label") == "input token at 1,024"
    n = renders(page)
    page.fill("#input_len", "4096")
    settled(page, n)
    assert card(page, "prices", "input", "label") == "input token at 4,096"
