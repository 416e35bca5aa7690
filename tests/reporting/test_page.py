"""The report page: self-contained (nothing fetched), tables readable without scripts,
names escaped, and in a real headless Chromium: drawn with no console error and no
request, every chart with data, a screenshot of the bundled sample's report written.

The browser is Debian's ``chromium-headless-shell`` (``.ci/run`` installs it); where none
is installed the browser tests skip and say so. ``DCPFAST_SCREENSHOTS=DIR`` keeps the
screenshots in DIR.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

import dcpfast
from dcpfast import testing as t
from tests.browser import find_browser, open_page

pytest.importorskip("bokeh", reason="the page needs the report extra: pip install "
                                    "'dcpfast[report]'")
needs_browser = pytest.mark.skipif(
    find_browser() is None,
    reason="no headless Chromium: apt-get install chromium-headless-shell (or chromium)")

#: JavaScript: per chart (bokeh figure), the points of its data sources; every chart must
#: have some.
_DRAWN = """Bokeh.documents.flatMap(d => d.roots()).map(root =>
    (root.renderers || []).reduce((n, r) => n + (r.data_source ? r.data_source.get_length()
                                                 : 0), 0))"""


@pytest.fixture(scope="module")
def sample_page(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("page") / "sample.html"
    dcpfast.report(t.SAMPLE_PCAP).to_html(path)
    return path


def test_bokeh_finds_nothing_wrong_with_the_charts(caplog, tmp_path):
    """bokeh checks the models it writes (a glyph's column missing, say) and logs errors."""
    with caplog.at_level("WARNING", logger="bokeh"):
        dcpfast.report(t.SAMPLE_PCAP).to_html(tmp_path / "page.html")
    assert not [r for r in caplog.records if r.name.startswith("bokeh")]


def _kept(shot: Path) -> None:
    where = os.environ.get("DCPFAST_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(where) / shot.name)


def test_the_page_holds_everything_it_shows(sample_page):
    page = sample_page.read_text()
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=", page, re.I)
    assert "@import" not in page and "url(http" not in page
    assert len(page.encode()) < 3 << 20
    # the tables are HTML: the headline, the stall and the streams read without scripts
    assert re.search(r"vb 848 stalled 12\.5 s", page)
    assert len(re.findall(r'<tr[^>]* id="stream-\d+"', page)) == 4 and 'id="stall-0"' in page
    assert "window.__reportReady" in page


def test_the_charts_share_one_time_axis_and_crosshair():
    from dcpfast.reporting.charts import Charts

    charts = Charts(dcpfast.report(t.SAMPLE_PCAP).figures).all()
    timed = [c for name, c in charts.items() if name not in ("sizes", "datatypes")]
    assert len(timed) == 6 and {"sizes", "datatypes"} <= set(charts)
    assert len({id(c.x_range) for c in timed}) == 1
    overlays = {id(tool.overlay) for c in timed for tool in c.tools
                if type(tool).__name__ == "CrosshairTool"}
    assert len(overlays) == 1


def test_the_seqno_lines_are_named_while_each_has_its_colour(tmp_path):
    """Up to ten streams the seqno chart's legend names them; more would share colours,
    and hovering names them instead."""
    from dcpfast.reporting.charts import Charts

    (legend,) = Charts(dcpfast.report(t.SAMPLE_PCAP).figures).all()["seqnos"].legend
    (item,) = legend.items
    assert item.label.field == "stream"
    path = tmp_path / "twelve.dcp"
    path.write_bytes(b"".join(f.data for f in t.synthetic_frames(600, vbuckets=12, seed=1)))
    figures = dcpfast.report(path).figures
    assert len(figures["streams"]) == 12
    assert not Charts(figures).all()["seqnos"].legend


def test_the_seqno_lines_hold_each_seqno_until_the_next():
    """A stream that sends nothing for a while draws a flat line, then a rise: each line
    is steps (no segment both rises and moves on in time)."""
    from dcpfast.reporting.charts import Charts

    chart = Charts(dcpfast.report(t.SAMPLE_PCAP).figures).all()["seqnos"]
    (source,) = [r.data_source for r in chart.renderers]
    rises = 0
    for xs, ys in zip(source.data["xs"], source.data["ys"]):
        for (x0, x1), (y0, y1) in zip(zip(xs, xs[1:]), zip(ys, ys[1:])):
            assert x0 == x1 or y0 == y1
            rises += y1 > y0
    assert rises


def test_anomalies_link_to_their_stream(tmp_path):
    from tests.report_scenarios import known

    path = tmp_path / "known.pcap"
    path.write_bytes(known().capture())
    page = dcpfast.report(path).to_html()
    anomalies = page[page.index('id="anomalies"'):]
    assert re.search(r'<td>ended_in_snapshot</td><td>[^<]*</td><td><a href="#stream-1">vb 9</a>',
                     anomalies)
    assert 'id="stream-1"' in page


def test_names_from_the_input_are_escaped(tmp_path):
    evil = b"</script><script>alert(1)</script>"
    data = t.mutation(evil, b"{}", by_seqno=1, cas=1_700_000_000 * 10**9) + \
        t.stream_end(vbucket=0)
    path = tmp_path / "<b>evil<b>.dcp"
    path.write_bytes(data)
    page = dcpfast.report(path).to_html()
    assert "<script>alert(1)" not in page and "<b>evil" not in page
    assert "&lt;b&gt;evil" in page
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in page


def test_without_bokeh_the_page_names_the_extra(monkeypatch):
    report = dcpfast.report(t.SAMPLE_PCAP)
    monkeypatch.setitem(sys.modules, "bokeh.embed", None)
    with pytest.raises(ImportError, match=r"dcpfast\[report\]"):
        report.to_html()
    assert report.to_json()                                   # the JSON needs no extra


@needs_browser
def test_the_sample_report_in_a_browser(sample_page, tmp_path):
    with open_page(sample_page) as page:
        assert page.errors == []
        assert [u for u in page.requests if not u.startswith("data:")] == \
            [sample_page.resolve().as_uri()]
        drawn = page.evaluate(_DRAWN)
        assert len(drawn) == 8 and all(n > 0 for n in drawn), drawn
        shot = tmp_path / "report-sample.png"
        page.screenshot(shot, 1400)
    assert shot.stat().st_size > 50_000
    _kept(shot)


@needs_browser
def test_the_tables_read_without_scripts(sample_page):
    with open_page(sample_page, scripts=False) as page:
        text = page.evaluate("document.body.innerText")
        assert page.evaluate("window.__reportReady === undefined")
    assert "vb 848 stalled 12.5 s" in text
    assert re.search(r"Stalls\s.*vb 848", text, re.S)
    assert "10.0.0.1:50123 -> 10.0.0.2:11210" in text


@needs_browser
def test_an_empty_report_opens_and_says_so(tmp_path):
    empty = tmp_path / "empty.dcp"
    empty.write_bytes(b"")
    path = tmp_path / "empty.html"
    dcpfast.report(empty).to_html(path)
    with open_page(path) as page:
        assert page.errors == []
        assert "holds no DCP frames" in page.evaluate("document.body.innerText")


@needs_browser
def test_a_page_that_reaches_out_is_caught(tmp_path):
    """The check itself: a page with a script from elsewhere and a console error fails."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script src='https://cdn.example.com/x.js'></script>"
                   "<script>console.error('boom'); window.__reportReady = true</script>"
                   "</body></html>")
    with open_page(bad) as page:
        assert "boom" in " ".join(page.errors)
        assert "https://cdn.example.com/x.js" in page.requests
