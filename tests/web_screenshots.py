"""Refresh docs/img/web-*.png: the hyperbola and pareto tabs, desktop (1400 x 1000) and phone (390 x 844), each with
a chart's readout open, and the roofline tab (web-roofline.png, desktop), taken by Debian's chromium through
playwright from a local `tokenmath serve`.

    python tests/web_screenshots.py   # writes docs/img/web-{hyperbola,pareto}-{desktop,phone}.png, web-roofline.png
                                      # and the desktop views web-<name>.png of PAGES (simulate among them)
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_web_browser import CHROMIUM, FLAGS, wait  # noqa: E402

from tokenmath.faces.web.server import start_in_thread  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "docs" / "img"
VIEWS = {"desktop": dict(viewport={"width": 1400, "height": 1000}),
         "phone": dict(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True, device_scale_factor=2)}
# tab -> (query, the chart to read, where on it to point: fractions of its width and height; None: focus the chart,
# which reads "your point" first)
SHOTS = {"hyperbola": ("?tab=hyperbola&batch=64", "#hyperbola-cost", (0.5, 0.5)),
         "pareto": ("?tab=pareto&batch=16", "#pareto-chart", None)}
# desktop views, one per tab (docs/img/web-<name>.png), in the same form as SHOTS
PAGES = {"hyperbola": ("?tab=hyperbola&batch=64", "#hyperbola-cost", (0.5, 0.5)),
         "pareto": ("?tab=pareto&batch=16", "#pareto-chart", None),
         "context": ("?tab=context&batch=64", "#context-step", (0.6, 0.5)),
         "prices": ("?tab=prices&batch=64", "#prices-chart", (0.5, 0.5)),
         "deduce": ("?tab=deduce", "#deduce-chart", None),
         "training": ("?tab=train", "#train-breakdown", None),
         "sensitivity": ("?tab=sensitivity&batch=64", "#sensitivity-chart", None),
         "simulate": ("?tab=simulate", "#simulate-sweep-tput", None),
         "speculative": ("?tab=hyperbola&model=llama-3.1-70b&chips=8&sp_mode=draft&sp_acceptance=0.7"
                         "&w_memory_bw_tbs=4.8", "#hyperbola-cost", (0.3, 0.5))}


def shoot(page, base: str, query: str, chart: str, at, view: str, path: Path) -> None:
    """Open `query`, open a readout on `chart` (pointing at `at`, tapping on a phone, or focusing it), save `path`."""
    page.goto(base + query)
    wait(page, "Number(document.querySelector('#main').dataset.renders) > 0", 60)
    wait(page, "document.querySelector('#main').dataset.pending === '0'", 60)
    svg = page.locator(f"{chart} svg.chart")
    if at is None:
        page.evaluate(f"window.scrollTo(0, document.querySelector('{chart}').getBoundingClientRect().top"
                      f" + window.scrollY - {330 if view == 'phone' else 420})")
        svg.focus()
    elif view == "phone":
        # the panel's cards, then the chart with its readout, in one screen
        page.evaluate(f"window.scrollTo(0, document.querySelector('{chart}').getBoundingClientRect().top"
                      f" + window.scrollY - 330)")
        time.sleep(0.2)
        b = svg.bounding_box()
        page.touchscreen.tap(b["x"] + b["width"] * at[0], b["y"] + b["height"] * at[1])
    else:
        svg.scroll_into_view_if_needed()
        b = svg.bounding_box()
        page.mouse.move(b["x"] + b["width"] * at[0], b["y"] + b["height"] * at[1])
    wait(page, f"!document.querySelector('{chart} .readout').hidden", 5)
    page.screenshot(path=str(path))
    print(path, page.locator(f"{chart} .readout").inner_text())


def main() -> None:
    from playwright.sync_api import sync_playwright
    OUT.mkdir(parents=True, exist_ok=True)
    srv, thread = start_in_thread("127.0.0.1", 0)
    base = f"http://127.0.0.1:{srv.server_address[1]}/"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
            for view, opts in VIEWS.items():
                context = browser.new_context(**opts)
                page = context.new_page()
                for tab, (query, chart, at) in SHOTS.items():
                    shoot(page, base, query, chart, at, view, OUT / f"web-{tab}-{view}.png")
                context.close()
            page = browser.new_page(**VIEWS["desktop"])
            for name, (query, chart, at) in PAGES.items():
                shoot(page, base, query, chart, at, "desktop", OUT / f"web-{name}.png")
            page.close()
            # the page as docs/reference/web-page.md opens it: the roofline tab, a decode op read out
            page = browser.new_page(viewport={"width": 1400, "height": 1130})
            page.goto(base + "?model=llama-3.1-70b&chips=8&batch=16")
            wait(page, "Number(document.querySelector('#main').dataset.renders) > 0", 60)
            wait(page, "document.querySelector('#main').dataset.pending === '0'", 60)
            dot = page.locator("#roofline svg .series.decode .dot").first
            dot.scroll_into_view_if_needed()
            b = dot.bounding_box()      # a mouse over it (dots of ops that coincide overlap: hover() would refuse)
            page.mouse.move(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2)
            wait(page, "!document.querySelector('#roofline .readout').hidden", 5)
            page.screenshot(path=str(OUT / "web-roofline.png"))
            print(OUT / "web-roofline.png", page.locator("#roofline .readout").inner_text())
            browser.close()
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


if __name__ == "__main__":
    main()
