"""The charts of the report page, drawn with bokeh (the ``dcpfast[report]`` extra) from
the figures alone.

Every chart over time shares one x range (zoom or pan one, all follow) and one crosshair
(a ``Span`` every chart's crosshair tool draws), and hovering shows the values. Series
are numpy arrays, which bokeh writes into the page as binary. The charts use only
models of bokeh's core bundle, the one script the page inlines.
"""

from __future__ import annotations

import datetime as dt
import math

import numpy as np

from .figures import trouble

#: Streams drawn on the timeline and the seqno chart; the ones with stalls, rollbacks,
#: anomalies or an end other than ``ok`` first.
MAX_ROWS = 64
#: Columns of the timeline at most (buckets are merged to fit).
TIMELINE_COLUMNS = 320
#: Opcodes drawn apart on the throughput chart (the busiest); the rest are summed.
MAX_OPCODES = 8
_TOOLS = "xpan,xwheel_zoom,xbox_zoom,reset"
#: Room left and right of every chart over time, so that their time axes line up.
_BORDER = 90
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf", "#d62728")
_STALL = "#d62728"
_EVENTS = {"request": ("triangle", "#1f77b4"), "accepted": ("circle", "#2ca02c"),
           "rollback": ("x", "#ff7f0e"), "refused": ("x", "#d62728"),
           "end": ("square", "#7f7f7f"), "end (not ok)": ("square", "#d62728"),
           "close": ("diamond", "#9467bd")}


def epoch_ms(iso: str) -> float:
    """An ISO 8601 UTC time of the figures as ms since the epoch."""
    moment = dt.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)
    return moment.timestamp() * 1000


def above(fig) -> None:
    """Put a chart's legend above it, in a row (clicking an entry hides its series)."""
    legend = fig.legend[0]
    legend.orientation = "horizontal"
    legend.click_policy = "hide"
    legend.border_line_alpha = 0
    fig.add_layout(legend, "above")


def gapped(buckets, x: np.ndarray, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """``x`` and ``columns`` with a NaN row between points more than a bucket apart, so
    that a line breaks where there is no data."""
    buckets = np.asarray(buckets)
    breaks = np.flatnonzero(np.diff(buckets) > 1) + 1
    return tuple(np.insert(np.asarray(c, np.float64), breaks, np.nan) for c in (x, *columns))


def stream_label(stream: dict, many: dict[str, int] | None) -> str:
    """How the charts name a stream: ``vb 12``, with its stream id and, when the report
    has several connections, the connection's number."""
    label = f"vb {stream['vbucket']}"
    if stream["stream_id"]:
        label += f" sid {stream['stream_id']}"
    if many:
        label += f" · #{many[stream['connection']]}"
    return label


def chosen(figures: dict) -> list[int]:
    """The streams drawn (indexes into ``figures["streams"]``): troubled ones first
    (``trouble``), then, where the series left streams out, those they hold; each by
    index."""
    streams, series = figures["streams"], figures["series"]
    charted = {s["stream"] for s in series["streams"]} \
        if series.get("streams_not_drawn") else None
    drawn = sorted(range(len(streams)), key=lambda i: (
        trouble(streams[i]), charted is not None and i not in charted, i))[:MAX_ROWS]
    return sorted(drawn)


class Charts:
    """The page's bokeh models, built from ``figures``."""

    def __init__(self, figures: dict):
        from bokeh.models import Range1d, Span

        self.figures = figures
        series = figures["series"]
        self.step = series["bucket_seconds"] * 1000
        self.start = epoch_ms(series["start"]) if series["start"] else 0.0
        end = self.start + max(series["buckets"], 1) * self.step
        self.x_range = Range1d(self.start, end)
        self.crosshair = Span(dimension="height", line_dash="dashed", line_color="#444")
        names = [c["name"] for c in figures["connections"]]
        self.many = {n: i + 1 for i, n in enumerate(names)} if len(names) > 1 else None
        self.rows = chosen(figures)
        self.labels = [stream_label(figures["streams"][i], self.many) for i in self.rows]

    def x(self, buckets) -> np.ndarray:
        """Bucket numbers as the ms of their middle."""
        return self.start + (np.asarray(buckets, np.float64) + 0.5) * self.step

    def figure(self, title: str, height: int = 240, **kwargs):
        from bokeh.models import CrosshairTool
        from bokeh.plotting import figure

        fig = figure(title=title, x_axis_type="datetime", x_range=self.x_range, height=height,
                     sizing_mode="stretch_width", tools=_TOOLS, active_scroll="xwheel_zoom",
                     toolbar_location="right", min_border_left=_BORDER,
                     min_border_right=_BORDER, **kwargs)
        fig.add_tools(CrosshairTool(overlay=self.crosshair))
        for stall in self.figures["stalls"]:
            if stall["vbucket"] is None:
                self._band(fig, stall)
        return fig

    def _band(self, fig, stall: dict) -> None:
        from bokeh.models import BoxAnnotation

        fig.add_layout(BoxAnnotation(left=epoch_ms(stall["start"]), right=epoch_ms(stall["end"]),
                                     fill_color=_STALL, fill_alpha=0.12, line_alpha=0))

    def hover(self, fig, renderers, fields: list[tuple[str, str]], mode: str = "mouse") -> None:
        from bokeh.models import HoverTool

        fig.add_tools(HoverTool(renderers=renderers, mode=mode,
                                tooltips=[("time", "@x{%F %T.%3N} UTC"), *fields],
                                formatters={"@x": "datetime"}))

    def all(self) -> dict:
        """Every chart that has something to draw, by section name."""
        out = {}
        if self.figures["series"]["buckets"]:
            for name, make in (("timeline", self.timeline), ("seqnos", self.seqnos),
                               ("throughput", self.throughput), ("flow", self.flow),
                               ("noops", self.noops), ("lag", self.lag)):
                chart = make()
                if chart is not None:
                    out[name] = chart
        sizes = self.sizes()
        if sizes is not None:
            out["sizes"] = sizes
            out["datatypes"] = self.datatypes()
        return out

    # -- over time ---------------------------------------------------------------------------

    def timeline(self):
        """One row per stream: its traffic per bucket (darker: more items), its stalls
        (red), and its requests, answers and end."""
        from bokeh.models import ColumnDataSource, FactorRange, LogColorMapper

        if not self.rows:
            return None
        fig = self.figure("Streams over time: items per bucket, stalls (red), events",
                          height=110 + 26 * len(self.rows),
                          y_range=FactorRange(*reversed(self.labels)))
        where = {i: label for i, label in zip(self.rows, self.labels)}
        cells = self._cells(where)
        colors = LogColorMapper(palette=("#9ecae1", "#6baed6", "#4292c6", "#2171b5",
                                         "#08519c", "#08306b"), low=1,
                                high=max(max(cells["items"], default=1), 2))
        shown = [fig.hbar(y="y", left="x", right="right", height=0.7,
                          source=ColumnDataSource(cells), line_alpha=0,
                          fill_color={"field": "items", "transform": colors})]
        label = {(s["connection"], s["vbucket"], s["stream_id"]): where[i]
                 for i, s in enumerate(self.figures["streams"]) if i in where}
        rows = [(label[key], s) for s in self.figures["stalls"]
                if (key := (s["connection"], s["vbucket"], s["stream_id"])) in label]
        if rows:
            starts = np.array([epoch_ms(s["start"]) for _, s in rows])
            shown.append(fig.hbar(y="y", left="x", right="right", height=0.9,
                                  fill_color=_STALL, fill_alpha=0.85, line_alpha=0,
                                  source=ColumnDataSource({
                                      "y": [y for y, _ in rows], "x": starts,
                                      "right": np.array([epoch_ms(s["end"]) for _, s in rows]),
                                      "label": [f"stalled {s['seconds']:,.1f} s"
                                                for _, s in rows]})))
        shown += self._events(fig, where)
        self.hover(fig, shown, [("stream", "@y"), ("", "@label")])
        fig.xgrid.grid_line_alpha = 0.3
        return fig

    def _cells(self, where: dict[int, str]) -> dict:
        """The timeline's cells: per drawn stream, its items in columns of merged buckets
        (at most ``TIMELINE_COLUMNS`` of them)."""
        width = 1
        while self.figures["series"]["buckets"] / width > TIMELINE_COLUMNS:
            width *= 2
        cells: dict[str, list] = {"x": [], "y": [], "right": [], "items": []}
        for s in self.figures["series"]["streams"]:
            if s["stream"] not in where:
                continue
            step = max(width, s["width"])
            columns = np.asarray(s["buckets"]) // step
            heads = np.flatnonzero(np.concatenate(([True], columns[1:] != columns[:-1])))
            items = np.add.reduceat(np.asarray(s["items"]), heads)
            keep = items > 0
            left = self.start + (columns[heads][keep] * step).astype(np.float64) * self.step
            cells["x"] += left.tolist()
            cells["right"] += (left + step * self.step).tolist()
            cells["y"] += [where[s["stream"]]] * int(keep.sum())
            cells["items"] += items[keep].tolist()
        out: dict = {k: np.asarray(v, np.float64) for k, v in cells.items() if k != "y"}
        out["y"] = cells["y"]
        out["label"] = [f"{n:,.0f} items" for n in cells["items"]]
        return out

    def _events(self, fig, where: dict[int, str]) -> list:
        """The drawn streams' requests, answers and ends, one glyph per kind of event."""
        from bokeh.models import ColumnDataSource

        points: dict[str, dict[str, list]] = {}
        for i, label in where.items():
            for e in self.figures["streams"][i]["events"]:
                if e["time"] is None:
                    continue
                what = e["what"]
                if what == "end" and e["detail"] != "ok":
                    what = "end (not ok)"
                found = points.setdefault(what, {"x": [], "y": [], "label": []})
                found["x"].append(epoch_ms(e["time"]))
                found["y"].append(label)
                found["label"].append(f"{e['what']} {e['detail']}".strip())
        glyphs = []
        for what, data in points.items():
            marker, color = _EVENTS[what]
            glyphs.append(fig.scatter("x", "y", marker=marker, size=9, color=color,
                                      legend_label=what, source=ColumnDataSource(
                                          {**data, "x": np.array(data["x"])})))
        if points:
            above(fig)
        return glyphs

    def seqnos(self):
        """The highest seqno each drawn stream reached, per bucket (one line each)."""
        from bokeh.models import ColumnDataSource, HoverTool

        where = {i: label for i, label in zip(self.rows, self.labels)}
        drawn = [s for s in self.figures["series"]["streams"]
                 if s["stream"] in where and any(s["items"])]
        if not drawn:
            return None
        # named in a legend (above, given room) while each has a colour of its own; else
        # on hover only
        named = {"legend_field": "stream"} if len(drawn) <= len(_PALETTE) else {}
        fig = self.figure("Seqno progress per vbucket (highest seqno per bucket)",
                          height=280 if named else 240)
        xs, ys = [], []
        for s in drawn:                # steps: a seqno holds until the next one it reached
            keep = np.asarray(s["items"]) > 0
            x = self.x(np.asarray(s["buckets"])[keep])
            y = np.asarray(s["seqno"], np.float64)[keep]
            xs.append(np.repeat(x, 2)[1:])
            ys.append(np.repeat(y, 2)[:-1])
        lines = fig.multi_line("xs", "ys", line_width=1.5, color="color", source=ColumnDataSource(
            {"xs": xs, "ys": ys, "stream": [where[s["stream"]] for s in drawn],
             "color": [_PALETTE[k % len(_PALETTE)] for k in range(len(drawn))]}), **named)
        if named:
            above(fig)
        fig.add_tools(HoverTool(renderers=[lines], tooltips=[
            ("time", "$x{%F %T.%3N} UTC"), ("stream", "@stream"), ("seqno", "$y{0,0}")],
            formatters={"$x": "datetime"}))
        fig.yaxis.axis_label = "seqno"
        return fig

    def throughput(self):
        """Frames per second by opcode (the busiest apart), and bytes per second."""
        from bokeh.models import (
            ColumnDataSource,
            DataRange1d,
            LinearAxis,
            NumeralTickFormatter,
            Range1d,
        )

        rows = self.figures["series"]["traffic"]
        if not rows:
            return None
        n = self.figures["series"]["buckets"]
        seconds = self.step / 1000
        per: dict[str, np.ndarray] = {}
        total_bytes = np.zeros(n)
        for r in rows:
            name = r["opcode"] + (" response" if r["response"] else "")
            frames = per.setdefault(name, np.zeros(n))
            np.add.at(frames, r["buckets"], r["frames"])
            np.add.at(total_bytes, r["buckets"], r["bytes"])
        busiest = sorted(per, key=lambda k: -per[k].sum())
        shown = busiest[:MAX_OPCODES]
        if len(busiest) > MAX_OPCODES:
            per["other"] = sum(per[k] for k in busiest[MAX_OPCODES:])
            shown.append("other")
        fig = self.figure("Throughput: frames per second by opcode, bytes per second (right)",
                          height=280)
        x = self.x(np.arange(n))
        lines = [fig.line("x", "y", color=_PALETTE[k % len(_PALETTE)], legend_label=name,
                          source=ColumnDataSource({"x": x, "y": per[name] / seconds,
                                                   "label": [name] * n}))
                 for k, name in enumerate(shown)]
        fig.y_range = DataRange1d(renderers=lines, start=0)
        rate = total_bytes / seconds
        fig.extra_y_ranges = {"bytes": Range1d(0, max(float(rate.max()), 1.0) * 1.05)}
        fig.add_layout(LinearAxis(y_range_name="bytes", axis_label="bytes/s",
                                  formatter=NumeralTickFormatter(format="0.[0]a")), "right")
        lines.append(fig.line("x", "y", y_range_name="bytes", color="#000", line_dash="dotted",
                              legend_label="bytes/s", source=ColumnDataSource(
                                  {"x": x, "y": rate, "label": ["bytes/s"] * n})))
        self.hover(fig, lines, [("", "@label"), ("per second", "@y{0,0.0}")], mode="vline")
        fig.yaxis[0].axis_label = "frames/s"
        fig.yaxis[0].formatter = NumeralTickFormatter(format="0.[0]a")
        above(fig)
        return fig

    def flow(self):
        """Unacknowledged bytes per connection against the buffer (the y range holds
        both), and acknowledgements."""
        from bokeh.models import ColumnDataSource, NumeralTickFormatter, Range1d, Span

        rows = self.figures["series"]["unacked"]
        acks = [r for r in self.figures["series"]["traffic"]
                if r["opcode"] == "buffer_ack" and not r["response"]]
        if not rows and not acks:
            return None
        fig = self.figure("Flow control: unacknowledged bytes (lines), buffer size (dashed), "
                          "Buffer Acknowledgements (grey ticks)")
        buffers = {f["connection"]: f["buffer_bytes"] for f in self.figures["flow_control"]}
        shown = []
        for k, r in enumerate(rows[:MAX_OPCODES]):
            color = _PALETTE[k % len(_PALETTE)]
            shown.append(fig.step("x", "y", color=color, mode="after",
                                  legend_label=self._short(r["connection"]),
                                  source=ColumnDataSource({
                                      "x": self.x(r["buckets"]),
                                      "y": np.asarray(r["bytes"], np.float64),
                                      "label": [r["connection"]] * len(r["buckets"])})))
            if buffers.get(r["connection"]):
                fig.add_layout(Span(location=buffers[r["connection"]], dimension="width",
                                    line_dash="dashed", line_color=color))
        if acks:
            x = np.concatenate([self.x(a["buckets"]) for a in acks])
            n = np.concatenate([np.asarray(a["frames"], np.float64) for a in acks])
            shown.append(fig.scatter("x", "y", marker="dash", angle=math.pi / 2, size=10,
                                     color="#888", source=ColumnDataSource({
                                         "x": x, "y": np.zeros(len(x)),
                                         "label": [f"{v:,.0f} Buffer Acknowledgements"
                                                   for v in n]})))
        self.hover(fig, shown, [("", "@label"), ("unacknowledged bytes", "@y{0,0}")])
        fig.yaxis.axis_label = "bytes"
        fig.yaxis.formatter = NumeralTickFormatter(format="0.[0]a")
        if rows:
            # the buffer lines are annotations, which an automatic range leaves out
            drawn = rows[:MAX_OPCODES]
            top = max([max(r["bytes"], default=0) for r in drawn]
                      + [buffers.get(r["connection"]) or 0 for r in drawn])
            fig.y_range = Range1d(0, max(top, 1) * 1.05)
            above(fig)
        return fig

    def _short(self, name: str) -> str:
        return f"#{self.many[name]}" if self.many else name

    def noops(self):
        """NOOP round trips per bucket: their mean, and the fastest to the slowest."""
        from bokeh.models import ColumnDataSource

        r = self.figures["series"]["noop_rtt_ms"]
        if not r["buckets"]:
            return None
        fig = self.figure("NOOP round trips (ms): mean per bucket, fastest to slowest",
                          height=200)
        x = self.x(r["buckets"])
        source = ColumnDataSource({"x": x, "low": np.asarray(r["min"]),
                                   "high": np.asarray(r["max"]), "y": np.asarray(r["mean"])})
        fig.segment("x", "low", "x", "high", source=source, color="#9ecae1", line_width=3)
        dots = fig.scatter("x", "y", source=source, size=6, color="#08519c")
        self.hover(fig, [dots], [("mean ms", "@y{0,0.000}"), ("min ms", "@low{0,0.000}"),
                                 ("max ms", "@high{0,0.000}")])
        fig.yaxis.axis_label = "ms"
        return fig

    def lag(self):
        """Capture time minus CAS time of the document changes, per bucket; where the
        capture's clock is behind the CAS clock (lags of 0 or less, which a log scale
        cannot draw), the chart says so."""
        from bokeh.models import ColumnDataSource, Title

        r = self.figures["series"]["lag_ms"]
        if not r["buckets"]:
            return None
        fig = self.figure("Lag on the wire: capture time minus CAS time (ms, log scale)",
                          height=240, y_axis_type="log")
        dots = []
        for k, name in enumerate(("p50", "p99", "max")):
            y = np.asarray(r[name], np.float64)
            y[y <= 0] = np.nan
            x, y, n = gapped(r["buckets"], self.x(r["buckets"]), y, np.asarray(r["count"]))
            source = ColumnDataSource({"x": x, "y": y, "n": n, "label": [name] * len(x)})
            fig.line("x", "y", source=source, color=_PALETTE[k], legend_label=name)
            dots.append(fig.scatter("x", "y", source=source, color=_PALETTE[k], size=4,
                                    legend_label=name))
        self.hover(fig, dots, [("", "@label"), ("ms", "@y{0,0.000}"), ("changes", "@n")])
        fig.yaxis.axis_label = "ms"
        above(fig)
        behind = _behind(r, self.figures["lag_ms"])
        if behind:
            fig.add_layout(Title(text=behind, text_color=_STALL, text_font_style="normal"),
                           "above")
        return fig

    # -- the documents ---------------------------------------------------------------------

    def sizes(self):
        """Value sizes of the document changes, one bar per size bin."""
        from bokeh.models import ColumnDataSource, FactorRange, HoverTool
        from bokeh.plotting import figure

        sizes = self.figures["documents"]["value_sizes"]
        bins = sizes["bins"]
        names = [k for k in sizes if k != "bins" and any(sizes[k])]
        if not names:
            return None
        total = np.sum([sizes[k] for k in names], axis=0)
        used = np.flatnonzero(total)
        labels = [_size_label(bins, int(b)) for b in used]
        fig = figure(title="Value sizes of the document changes (bytes)", height=260,
                     sizing_mode="stretch_width", x_range=FactorRange(*labels),
                     tools="hover", tooltips=[("size", "@label"), ("changes", "@n{0,0}")])
        fig.vbar(x="label", top="n", width=0.8, color="#4292c6",
                 source=ColumnDataSource({"label": labels, "n": total[used]}))
        fig.xaxis.major_label_orientation = 0.8
        fig.select_one(HoverTool).mode = "mouse"
        return fig

    def datatypes(self):
        """Document changes with a value, by datatype."""
        from bokeh.models import ColumnDataSource
        from bokeh.plotting import figure

        found = {k: v for k, v in self.figures["documents"]["datatypes"].items() if v}
        labels = list(found) or ["none"]
        fig = figure(title="Datatypes of the values", height=260, sizing_mode="stretch_width",
                     x_range=labels, tools="hover", tooltips=[("datatype", "@label"),
                                                              ("changes", "@n{0,0}")])
        fig.vbar(x="label", top="n", width=0.8, color="#6baed6",
                 source=ColumnDataSource({"label": labels,
                                          "n": np.array([found.get(k, 0) for k in labels])}))
        return fig


def _behind(series: dict, lag: dict | None) -> str:
    """Why the lag chart draws nothing, or not every bucket: the capture's clock behind
    the CAS clock ('' when every bucket is drawn)."""
    low = sum(v <= 0 for v in series["max"])
    if not low:
        return ""
    median = f" (median lag {lag['median']:,.3f} ms)" if lag else ""
    if low == len(series["max"]):
        return (f"Nothing to draw: every change was captured before its CAS time{median}. "
                "The capture's clock is behind the CAS clock (the server's), and a log "
                "scale draws no lag of 0 or less.")
    return (f"{low:,} of {len(series['max']):,} buckets not drawn: their changes were "
            "captured before their CAS time (the capture's clock is behind the CAS clock).")


def _size_label(bins: list[int], b: int) -> str:
    if b == 0:
        return "0"
    low, high = bins[b], 2 * bins[b] - 1
    return _bytes(low) if low == high else f"{_bytes(low)}-{_bytes(high)}"


def _bytes(n: int) -> str:
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size:
            return f"{n // size}{unit}"
    return str(n)

