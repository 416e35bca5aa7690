"""The targets the suite holds the scan to, on the mixed corpus: each with the measured
value and whether it is met. They are reported, never asserted."""

from __future__ import annotations


def targets(report: dict) -> list[dict]:
    """The targets of the suite (on the mixed corpus), each with the measured value and
    whether it is met (None: not judged or not measured)."""
    mixed = report["corpora"].get("mixed")
    out = []

    def target(name, goal, measured, shown, met, note=""):
        out.append({"target": name, "goal": goal, "measured": measured, "shown": shown,
                    "met": met, "note": note})

    if mixed is not None:
        t = mixed["timings"]
        for key, goal, what in (("scan", 0.5, "all columns"), ("scan5", 0.75, "5 columns")):
            name = f"scan, {what}: >= {goal:.0%} of the probe's frames/s"
            if "of_probe" in t[key]:
                value = t[key]["of_probe"]
                target(name, goal, value, f"{value:.0%}", value >= goal)
            else:
                target(name, goal, None, "no probe", None, report["probe"]["note"])
        # Arrow output with keys and values as views, by the faster of two ways: a plain
        # scan and to_arrow(binary_view=True), or scan(binary_views=True) and the same
        after = t["to_arrow_view"]["over_scan"]
        early = (t["scan_views"]["best"] + t["to_arrow_early"]["best"]) / t["scan"]["best"] - 1
        value = min(after, early)
        target("to_arrow(binary_view=True) adds <= 20% to the scan time", 0.2, value,
               f"+{value:.0%}", value <= 0.2, "judged here, over a plain scan: "
               f"+{after:.0%} after it, +{early:.0%} when scan(binary_views=True) wrote the "
               f"views (that scan +{t['scan_views']['best'] / t['scan']['best'] - 1:.0%}, "
               f"the conversion then +{t['to_arrow_early']['over_scan']:.0%} of it)")
        value = t["to_arrow"]["over_scan"]
        target("to_arrow() adds <= 20% to the scan time", 0.2, value, f"+{value:.0%}", None,
               "for information: the gather copies every key and value byte")
        value = t["iter_batches_mapped"]["frames_per_s"] / t["scan"]["frames_per_s"]
        read = t["iter_batches"]["frames_per_s"] / t["scan"]["frames_per_s"]
        target("iter_batches(file, memory_map=True): >= 80% of the in-memory scan's "
               "frames/s", 0.8, value, f"{value:.0%}", value >= 0.8,
               f"all columns, page cache warm, one thread; read into memory (the default, "
               f"safe from files shortened meanwhile): {read:.0%}")
    rss = report.get("rss")
    name = "iter_batches over a 2 GB dump: peak RSS <= 4 x batch_bytes above the baseline"
    if rss:
        mib = rss["batch_bytes"] >> 20
        for key, what, judged in (("all_columns", "all columns", True),
                                  ("projection", "5 columns", False),
                                  ("all_columns_mapped", "all columns, memory_map=True",
                                   False)):
            if key not in rss:
                continue
            value = rss[key]["growth_over_batch"]
            target(f"{name}, {what}", 4.0, value, f"{rss[key]['growth_bytes'] / 2**20:,.0f} "
                   f"MiB = {value:.2f} x {mib} MiB", value <= 4.0 if judged else None,
                   f"{'judged here' if judged else 'for information'}: "
                   f"{rss['dump_bytes'] / 1e9:.2f} GB, the batch held and the batch read "
                   "(input and columns), the recycled memory included")
    else:
        target(name, 4.0, None, "not measured", None, "run without --quick, or with --rss")
    return out


def verdict(met) -> str:
    """MET, NOT MET, or - for a target not judged."""
    return "MET" if met else "-" if met is None else "NOT MET"


def print_targets(found: list[dict]) -> None:
    """The targets with their verdicts."""
    print("\ntargets (mixed corpus)")
    for t in found:
        note = f" ({t['note']})" if t["note"] else ""
        print(f"  {verdict(t['met']):<8} {t['target']}: {t['shown']}{note}")
