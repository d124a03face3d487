# browser.py: libprof's HTML report in a real browser — Debian's chromium driven by playwright for
# Python (the project's environment; executable_path, no browser download). Prints what the page
# did as one JSON object, {"fatal": ...} and status 1 if the page could not be driven.
# usage: browser.py flame HTML SHOT.png   the allocation flame graphs: zoom, zoom out, search, a screenshot
#        browser.py window HTML           the time window typed and dragged over the heap chart
#        browser.py cpu HTML [A,B]        the CPU flame graph and the CPU chart under time windows: before
#                                         and after the gap A..B ms (the program's sleep between its two
#                                         phases), or the first 45 % and the last 38 % of the run
#        browser.py labels HTML           the thread bars' labels: how many, how many run past the page
#        browser.py shot HTML PNG [HEIGHT] a picture of the page's top (HEIGHT px, default 1400), for the README
import json
import sys

from playwright.sync_api import sync_playwright


def flame(page, out, shot):
    frame = page.locator('#flame-alloc g.fr[data-n="temp_b"]').first
    out["before"] = float(frame.locator("rect").get_attribute("width"))
    frame.click()
    out["after"] = float(frame.locator("rect").get_attribute("width"))
    out["hidden"] = page.locator('#flame-alloc g.fr[data-n="big"]').first.evaluate("g => g.style.display === 'none'")
    page.locator('#flame-alloc g.fr[data-d="0"]').click()
    out["reset"] = float(frame.locator("rect").get_attribute("width"))
    page.locator("#flame-peak input.search").fill("^keep$")
    out["matches"] = float(page.locator("#flame-peak").get_attribute("data-matches"))
    out["matched"] = page.locator("#flame-peak .matched").text_content()
    out["sites"] = page.locator("#sites-over-time polygon.site").count()
    page.screenshot(path=shot, full_page=True)


def drag(page, chart):
    page.locator(chart).scroll_into_view_if_needed()
    box = page.locator(chart).bounding_box()
    page.mouse.move(box["x"] + box["width"] * 59 / 820, box["y"] + 60)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 805 / 820, box["y"] + 60)
    page.mouse.up()


ROW = """([n, c]) => { for (const tr of document.querySelectorAll('#window tr'))
    if (tr.dataset.name === n) return c < 0 ? [+tr.cells[1].dataset.v, +tr.cells[2].dataset.v] : +tr.cells[c].dataset.v;
    return c < 0 ? [0, 0] : 0; }"""


def window(page, out):
    def row(n):
        return page.evaluate(ROW, [n, -1])

    out["all"] = row("malloc")
    page.fill("#win-from", "0")
    page.fill("#win-to", "1000")
    out["a"] = row("malloc")
    page.fill("#win-from", "1000")
    page.fill("#win-to", "2500")
    out["b"] = row("malloc")
    out["sleeps"] = row("nanosleep")
    out["band"] = float(page.locator("#heap-over-time rect.win-band").get_attribute("width"))
    drag(page, "#heap-over-time")
    out["dragged"] = row("malloc")


FRAME = """n => { const g = document.querySelector('#flame-cpu g.fr[data-n="' + n + '"]');
    return g ? [+g.dataset.v, +g.querySelector('rect').getAttribute('width'), g.style.display === 'none' ? 0 : 1]
             : [-1, -1, -1]; }"""


def cpu(page, out, gap=None):
    def fr(n):
        return page.evaluate(FRAME, n)

    def row(n):
        return page.evaluate(ROW, [n, 2])

    out["lines"] = page.locator("#cpu-over-time polyline").count()
    out["all"] = [fr("f1"), fr("f2")]
    ms = float(page.locator("#win-to").input_value())
    out["ms"] = ms
    a, b = (float(x) for x in gap.split(",")) if gap else (ms * 0.45, ms * 0.62)
    page.fill("#win-from", "0")
    page.fill("#win-to", str(a))
    out["first"] = [fr("f1"), fr("f2"), row("CPU: main")]
    page.fill("#win-from", str(b))
    page.fill("#win-to", str(ms))
    out["second"] = [fr("f1"), fr("f2"), row("CPU: main")]
    drag(page, "#cpu-over-time")
    out["dragged"] = [float(page.locator("#win-from").input_value()), float(page.locator("#win-to").input_value()),
                      row("CPU: main")]


def labels(page, out):
    width = page.evaluate("document.documentElement.clientWidth")
    boxes = page.evaluate("""() => Array.from(document.querySelectorAll('text.bar-label')).map(t => {
        const r = t.getBoundingClientRect(), s = t.ownerSVGElement.getBoundingClientRect();
        return [r.right, s.right]; })""")
    out["labels"] = len(boxes)
    out["past"] = sum(1 for r, s in boxes if r > s + 0.5 or r > width + 0.5)


def main():
    mode, html = sys.argv[1], sys.argv[2]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto("file://" + html)
        out = {"errors": errors}
        if mode == "flame":
            flame(page, out, sys.argv[3])
        elif mode == "window":
            window(page, out)
        elif mode == "labels":
            labels(page, out)
        elif mode == "shot":
            h = int(sys.argv[4]) if len(sys.argv) > 4 else 1400
            page.screenshot(path=sys.argv[3], full_page=True, clip={"x": 0, "y": 0, "width": 1100, "height": h})
        else:
            cpu(page, out, sys.argv[3] if len(sys.argv) > 3 else None)
        print(json.dumps(out))
        browser.close()


try:
    main()
except Exception as e:  # the page could not be driven: say why, as JSON
    print(json.dumps({"fatal": str(e)}))
    sys.exit(1)
