"""The report as one HTML page that opens from disk with no network: bokeh's core script
and the charts inlined, every table plain HTML (readable with scripts off), and a
headline that says first which stream stalled, rolled back or ended badly, and when.

The page sets ``window.__reportReady`` once every chart is drawn (headless browsers wait
for it), and ``window.__reportReadyAt`` to the milliseconds that took.
"""

from __future__ import annotations

import html

from ..errors import optional
from .charts import Charts, chosen, stream_label

#: Stalls, rollbacks and bad ends named in the headline.
HEADLINE = 5
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
 margin:0;color:#1b1f24;background:#fff}
header{background:#0b3954;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:22px}header p{margin:4px 0 0;opacity:.85}
main{padding:8px 24px 40px;max-width:1500px}
nav{margin:10px 0;font-size:13px}nav a{margin-right:12px}
h2{margin:28px 0 4px;font-size:18px;border-bottom:1px solid #ddd;padding-bottom:3px}
p.note{margin:2px 0 8px;color:#555;font-size:13px;max-width:1100px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;min-width:120px}
.card b{display:block;font-size:18px}.card span{color:#555;font-size:12px}
.headline{border-left:5px solid #d62728;background:#fff5f5;padding:8px 14px;margin:10px 0}
.headline.ok{border-color:#2ca02c;background:#f4fbf4}
.headline li{margin:3px 0}.headline strong{font-size:15px}
.warn{border-left:5px solid #e6a700;background:#fffbea;padding:6px 14px;margin:8px 0}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0 12px}
th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f5f7}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.bad td{background:#fff0f0}details summary{cursor:pointer;color:#0b5cad}
.chart{margin:4px 0 10px}
"""
_NOTES = {
    "timeline": "One row per stream (the troubled ones first): each bucket it carried items "
                "in is blue, darker for more; red bars are stalls (no message for longer than "
                "the threshold while the stream was open); marks are its requests, the "
                "server's answers (accepted with a failover log, rollback, refused) and its "
                "end. Connection-wide stalls shade every chart (the streams' stalls that "
                "coincide with one are its shading, not bars). Zoom one chart (drag, wheel) "
                "and all follow; the dashed crosshair marks the same time on every chart.",
    "seqnos": "The highest seqno each stream reached in each bucket: a flat line is a "
              "stream that stopped moving.",
    "throughput": "Frames per second of each opcode (both directions; the busiest apart, "
                  "the rest as 'other') and bytes per second of all frames (dotted, right "
                  "axis).",
    "flow": "Bytes the server sent against the client's flow-control buffer and not yet "
            "acknowledged (the most per bucket): sent DCP requests (Noops excepted, a Prepare "
            "2 bytes more) minus Buffer Acknowledgements, in capture order. At the dashed line "
            "the server may send no more until the client acknowledges.",
    "noops": "Time from each server NOOP to the client's response of the same opaque.",
    "lag": "How long after a change's CAS time (the vbucket's clock when it was made) it "
           "crossed the wire: a backfill from disk shows the documents' age, a stream at the "
           "tip the replication delay. Clock skew between the server and the capture shows "
           "too.",
    "sizes": "Sizes of the values of mutations, deletions, expirations and prepares.",
    "datatypes": "Values by datatype flags (JSON, Snappy-compressed, with xattrs).",
}


def page(figures: dict) -> str:
    """The HTML page of ``figures`` (needs bokeh: the ``dcpfast[report]`` extra)."""
    embed, resources = _bokeh()
    charts = Charts(figures).all()
    script, divs = embed.components(charts) if charts else ("", {})
    core = resources.Resources(mode="inline", components=["bokeh"])
    inputs = ", ".join(i["name"] for i in figures["inputs"])
    clock = ("capture timestamps" if figures["time"]["clock"] == "capture"
             else "the documents' CAS clock (a dump has no arrival times)")
    body = [f"<header><h1>DCP report</h1><p>{_e(inputs)} · times: {_e(clock)}, UTC</p>"
            "</header><main>", _overview(figures), _nav(divs)]
    for name, title in (("timeline", "Streams over time"), ("seqnos", "Seqno progress"),
                        ("throughput", "Throughput"), ("flow", "Flow control"),
                        ("noops", "NOOP round trips"), ("lag", "Lag on the wire")):
        if name in divs:
            body.append(f'<h2 id="{name}">{title}</h2><p class="note">{_NOTES[name]}</p>'
                        f'<div class="chart">{divs[name]}</div>')
    body += [_stall_table(figures), _stream_table(figures), _flow_table(figures),
             _connection_table(figures), _documents(figures, divs), _anomaly_table(figures),
             _input_table(figures), "</main>"]
    ready = ("<script>(function wait(){var B=window.Bokeh;"
             "if(!%d||(B&&B.documents.length&&B.documents.every(function(d){return d.is_idle})))"
             "{window.__reportReadyAt=performance.now();window.__reportReady=true}"
             "else{setTimeout(wait,20)}})()</script>" % bool(charts))
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>DCP report: {_e(inputs)}</title><style>{_CSS}</style>"
            + (core.render_js() + core.render_css() if charts else "")
            + "</head><body>" + "".join(body) + script + ready + "</body></html>")


def _bokeh():
    return (optional("bokeh.embed", "report", "the report page"),
            optional("bokeh.resources", "report", "the report page"))


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def _t(iso: str | None) -> str:
    """An ISO time of the figures as the page shows it: ``2024-05-01 12:00:03.250``."""
    return "-" if iso is None else iso[:10] + " " + iso[11:23]


def _n(value, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _table(head: list[str], rows: list[list[str]], *, numeric=(), bad=(), ids=()) -> str:
    """An HTML table: ``rows`` already escaped; ``numeric`` columns right-aligned; rows
    in ``bad`` shaded; ``ids`` the rows' anchors."""
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for k, row in enumerate(rows):
        attrs = (' class="bad"' if k in bad else "") + (f' id="{ids[k]}"' if ids else "")
        out.append(f"<tr{attrs}>" + "".join(
            f'<td class="n">{c}</td>' if j in numeric else f"<td>{c}</td>"
            for j, c in enumerate(row)) + "</tr>")
    return "".join(out) + "</table>"


def _who(figures: dict, row: dict) -> str:
    """How the page names the stream of a row (a stall, a stream, an anomaly)."""
    connection, vbucket = row["connection"], row["vbucket"]
    names = [c["name"] for c in figures["connections"]]
    many = {n: i + 1 for i, n in enumerate(names)} if len(names) > 1 else None
    if vbucket is None:
        opened = row.get("streams_open")
        where = f"every stream of the connection ({opened:,} open)" if opened \
            else "all streams"
    else:
        where = stream_label(row, many)
    return where if many is None or vbucket is not None else f"{where} · #{many[connection]}"


def _overview(f: dict) -> str:
    t = f["time"]
    cards = [("time span", f"{_t(t['first'])} to {_t(t['last'])}"),
             ("seconds", _n(t["seconds"], 3)), ("connections", _n(len(f["connections"]))),
             ("streams", _n(len(f["streams"]))), ("frames", _n(f["frames"])),
             ("bytes", _n(f["bytes"])),
             ("frames/s", _n(f["rates"]["frames_per_second"], 1) if f["rates"] else "-"),
             ("bytes/s", _n(f["rates"]["bytes_per_second"]) if f["rates"] else "-"),
             ("stalls", f'<a href="#stalls">{_n(len(f["stalls"]))}</a>'),
             ("anomalies", f'<a href="#anomalies">{_n(sum(f["anomaly_counts"].values()))}</a>')]
    out = ['<section id="overview"><div class="cards">']
    out += [f"<div class=\"card\"><b>{v}</b><span>{_e(k)}</span></div>" for k, v in cards]
    out.append("</div>")
    out.append(_headline(f))
    out += [f'<div class="warn">{_e(w)}</div>' for w in f["warnings"]]
    return "".join(out) + "</section>"


def _headline(f: dict) -> str:
    """The first thing read: the longest stalls, the rollbacks and the bad ends, and the
    streams short of the high seqno the server gave."""
    items = []
    longest = sorted(range(len(f["stalls"])), key=lambda i: -f["stalls"][i]["seconds"])
    for i in longest[:HEADLINE]:
        s = f["stalls"][i]
        flow = " at the flow-control limit" if s["at_flow_control_limit"] else ""
        items.append(f'<li><a href="#stall-{i}"><strong>{_e(_who(f, s))}'
                     f' stalled {s["seconds"]:,.1f} s</strong></a> from {_e(_t(s["start"]))}'
                     f' to {_e(_t(s["end"]))}{" (still silent at the end)" if s["ongoing"] else ""}'
                     f'{flow} on {_e(s["connection"])}</li>')
    troubled = [(i, s) for i, s in enumerate(f["streams"])
                if s["rollbacks"] or s["end"] not in (None, "ok")]
    for i, s in troubled[:HEADLINE]:
        what = []
        if s["rollbacks"]:
            what.append(f"rolled back to seqno {', '.join(map(str, s['rollback_seqnos']))}")
        if s["end"] not in (None, "ok"):
            what.append(f"ended: {s['end']}")
        items.append(f'<li><a href="#stream-{i}">{_e(_who(f, s))}</a> '
                     f'{_e("; ".join(what))}</li>')
    if len(troubled) > HEADLINE:
        items.append(f'<li><a href="#streams">{len(troubled) - HEADLINE} more streams rolled '
                     "back or ended badly</a></li>")
    for b in f["behind_server"][:HEADLINE]:
        items.append(f'<li>{_e(_who(f, b))} captured to seqno {b["last_seqno"] or 0:,} of the '
                     f'{b["server_seqno"]:,} the server gave (GetAllVbSeqnos) on '
                     f'{_e(b["connection"])}</li>')
    if len(f["behind_server"]) > HEADLINE:
        items.append(f'<li>{len(f["behind_server"]) - HEADLINE} more streams short of the '
                     "server's high seqno</li>")
    if not items:
        return (f'<div class="headline ok"><strong>No stall longer than {f["stall_seconds"]:g} s, '
                "no rollback, no stream ended badly.</strong></div>")
    return '<div class="headline"><ul>' + "".join(items) + "</ul></div>"


def _nav(divs: dict) -> str:
    links = [(n, n) for n in ("timeline", "seqnos", "throughput", "flow", "noops", "lag")
             if n in divs]
    links += [("stalls", "stalls"), ("streams", "streams"), ("flow-control", "flow control"),
              ("connections", "connections"), ("documents", "documents"),
              ("anomalies", "anomalies"), ("inputs", "inputs")]
    return "<nav>" + "".join(f'<a href="#{a}">{_e(t)}</a>' for a, t in links) + "</nav>"


def _stall_table(f: dict) -> str:
    rows = [[str(i + 1), _e(s["connection"]), _e(_who(f, s)),
             _e(_t(s["start"])), _e(_t(s["end"])), _n(s["seconds"], 3),
             "yes" if s["ongoing"] else "", {True: "yes", False: "no", None: "-"}[
                 s["at_flow_control_limit"]]] for i, s in enumerate(f["stalls"])]
    more = f"<p class=\"note\">{f['stalls_not_listed']:,} shorter stalls not listed.</p>" \
        if f["stalls_not_listed"] else ""
    return (f'<h2 id="stalls">Stalls</h2><p class="note">Silence longer than '
            f'{f["stall_seconds"]:g} s on an open stream, or on the whole connection while any '
            "stream was open (the stalls of its streams that began and ended with it, "
            "within a tenth of it and a second, are folded into it: one pause, one row). "
            "'still silent' stalls lasted to the end of the input.</p>"
            + (_table(["#", "connection", "stream", "from", "to", "seconds", "still silent",
                       "at flow-control limit"], rows, numeric=(0, 5),
                      ids=[f"stall-{i}" for i in range(len(rows))]) if rows else
               "<p>None.</p>") + more)


def _stream_table(f: dict) -> str:
    rows, bad = [], []
    drawn = set(chosen(f))
    for i, s in enumerate(f["streams"]):
        if s["stalls"] or s["rollbacks"] or s["anomalies"] or s["end"] not in (None, "ok"):
            bad.append(i)
        kinds = ", ".join(f"{n} {k}" for k, n in s["snapshot_kinds"].items() if n)
        events = "".join(f"<li>{_e(_t(e['time']))} {_e(e['what'])} {_e(e['detail'])}</li>"
                         for e in s["events"])
        if s["more_events"]:
            events += f"<li>... {s['more_events']:,} more</li>"
        rows.append([_e(s["connection"]), _n(s["vbucket"]), _n(s["stream_id"]),
                     _n(s["requests"]),
                     _e(", ".join(map(str, s["rollback_seqnos"])) or "-"), _e(s["end"] or "-"),
                     f"{_n(s['snapshots'])}" + (f" ({_e(kinds)})" if kinds else ""),
                     _n(s["items"]), _n(s["last_seqno"]), _e(_t(s["first"])),
                     _e(_t(s["last"])), _n(s["stalls"]), _n(s["anomalies"]),
                     f"<details><summary>{len(s['events'])}</summary><ul>{events}</ul>"
                     "</details>" if events else "-", "yes" if i in drawn else ""])
    return ('<h2 id="streams">Streams</h2><p class="note">Every vbucket stream of every '
            "connection: the Stream Requests the client sent, the rollbacks the server "
            "answered with (to seqno), its latest end, its snapshots by kind, its items and "
            "highest seqno, and its events in order. Shaded: stalls, rollbacks, anomalies or "
            "an end other than ok.</p>"
            + _table(["connection", "vbucket", "stream id", "requests", "rollbacks to",
                      "end", "snapshots", "items", "highest seqno", "first", "last",
                      "stalls", "anomalies", "events", "charted"], rows,
                     numeric=(1, 2, 3, 7, 8, 11, 12), bad=set(bad),
                     ids=[f"stream-{i}" for i in range(len(rows))]))


def _flow_table(f: dict) -> str:
    rows = [[_e(x["connection"]), _n(x["buffer_bytes"]), _n(x["acks"]), _n(x["acked_bytes"]),
             _n(x["sent_bytes"]), _n(x["max_unacked_bytes"]), _n(x["seconds_near_limit"], 3),
             _n(x["ack_interval_ms"]["median"], 1) if x["ack_interval_ms"] else "-"]
            for x in f["flow_control"]]
    return ('<h2 id="flow-control">Flow control</h2><p class="note">The buffer the client '
            "asked for (Control connection_buffer_size), its Buffer Acknowledgements and "
            "the bytes they gave back, the bytes the server charged, the most it had "
            "unacknowledged at once and the time spent at 90% of the buffer or more "
            "(captures only: a dump has no times to order the two sides).</p>"
            + _table(["connection", "buffer bytes", "acks", "acked bytes", "charged bytes",
                      "most unacknowledged", "seconds near the limit", "median ms between "
                      "acks"], rows, numeric=range(1, 8)))


def _connection_table(f: dict) -> str:
    n = f["noops"]
    rtt = n["rtt_ms"]
    rows = [[str(i + 1), _e(c["name"]), _n(c["frames_client"]), _n(c["frames_server"]),
             _n(c["bytes_client"]), _n(c["bytes_server"]), _e(_t(c["first"])),
             _e(_t(c["last"])), _n(c["streams"]), _n(c["stalls"]), _n(c["anomalies"]),
             _n(c["noops"]), _n(c["noop_rtt_ms"]["median"], 3) if c["noop_rtt_ms"] else "-"]
            for i, c in enumerate(f["connections"])]
    timed = f["server_duration_ms"]
    summary = (f"{n['count']:,} NOOPs from the servers, {n['answered']:,} answered"
               + (f"; round trip median {rtt['median']:,.3f} ms, slowest {rtt['max']:,.3f} ms"
                  if rtt else "") + "."
               + (f" The server's own time from request to answer, in {timed['count']:,} "
                  f"responses: median {timed['median']:,.3f} ms, 99th percentile "
                  f"{timed['p99']:,.3f} ms, slowest {timed['max']:,.3f} ms." if timed else ""))
    return ('<h2 id="connections">Connections</h2><p class="note">' + _e(summary) + "</p>"
            + _table(["#", "connection (client -> server)", "client frames", "server frames",
                      "client bytes", "server bytes", "first", "last", "streams", "stalls",
                      "anomalies", "NOOPs", "NOOP median ms"], rows,
                     numeric=(0, 2, 3, 4, 5, 8, 9, 10, 11, 12)))


def _documents(f: dict, divs: dict) -> str:
    d = f["documents"]
    changes = ", ".join(f"{n:,} {k}s" for k, n in d["changes"].items() if n) or "none"
    out = [f'<h2 id="documents">Documents</h2><p class="note">Changes: {_e(changes)}.</p>']
    for name in ("sizes", "datatypes"):
        if name in divs:
            out.append(f'<p class="note">{_NOTES[name]}</p><div class="chart">{divs[name]}</div>')
    out.append(_table(["datatype", "values"], [[_e(k), _n(v)] for k, v in d["datatypes"].items()
                                               if v], numeric=(1,)))
    names = [k for k in d["changes"]]
    out.append(_table(["collection id", "name", *names, "value bytes"],
                      [[f"0x{c['collection_id']:x}", _e(c["name"] or "-"),
                        *(_n(c[k]) for k in names), _n(c["value_bytes"])]
                       for c in d["collections"]], numeric=range(2, len(names) + 3)))
    exact = "" if d["key_versions_exact"] else (
        f" (lower bounds: each may be short by up to {d['key_versions_short_by_at_most']:,})")
    out.append(f'<p class="note">The keys with the most versions{_e(exact)}:</p>')
    out.append(_table(["collection", "key", "versions"],
                      [[_e(k["collection"] or f"0x{k['collection_id']:x}"), _e(k["key"]),
                        _n(k["versions"])] for k in d["top_keys"]], numeric=(2,)))
    return "".join(out)


def _anomaly_table(f: dict) -> str:
    where = {(s["connection"], s["vbucket"], s["stream_id"]): i
             for i, s in enumerate(f["streams"])}
    rows = []
    for a in f["anomalies"]:
        stream = "-"
        if a["vbucket"] is not None:
            stream = _e(_who(f, a))
            at = where.get((a["connection"], a["vbucket"], a["stream_id"]))
            if at is not None:
                stream = f'<a href="#stream-{at}">{stream}</a>'
        rows.append([_e(a["kind"]), _e(a["connection"] or "-"), stream, _n(a["offset"]),
                     _e(a["side"] or "-"), _e(_t(a["time"])), _e(a["detail"])])
    counts = ", ".join(f"{n:,} {k}" for k, n in sorted(f["anomaly_counts"].items())) or "none"
    return ('<h2 id="anomalies">Anomalies</h2><p class="note">The stream checks of '
            "dcpfast.streams.summarize and the damage skipped (offsets are byte positions in "
            "the server's or client's stream; a capture's own damage, in the file); a "
            "stream links to its row in the streams table. By kind: " + _e(counts) + ".</p>"
            + (_table(["kind", "connection", "stream", "offset", "side", "about when",
                       "detail"], rows, numeric=(3,)) if rows else "<p>None.</p>"))


def _input_table(f: dict) -> str:
    rows = [[_e(i["name"]), _e(i["kind"]), _e(i["side"]), _e(i["compression"] or "-")]
            for i in f["inputs"]]
    return ('<h2 id="inputs">Inputs</h2>' + _table(["input", "kind", "side", "compression"],
                                                   rows)
            + f'<p class="note">{_e(f["generator"])}, figures version {f["version"]}.</p>')
