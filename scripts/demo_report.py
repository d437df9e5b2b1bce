#!/usr/bin/env python3
"""Reads an experiment report for a person, and checks the demo's expected outcome.

Used by scripts/demo after `rxfleetctl experiment report NAME -o json`:

  demo_report.py read REPORT.json EXPERIMENT.json [PROMOTE_PREVIEW.txt ...]
      Prints three plain sentences computed from the report: which arm won in which
      segment (primary metric, its 95 % interval, how many adapters), which arms guardrails
      stopped and why, and what `rxfleetctl experiment promote` would write for each winning
      segment. EXPERIMENT.json is `rxfleetctl get experiment NAME -o json`; each
      PROMOTE_PREVIEW.txt is the output of `rxfleetctl experiment promote ... --dry-run` for a
      winning segment, in the order `promote-args` printed them (missing or unreadable ones are
      left out of the sentence, never guessed).
  demo_report.py promote-args REPORT.json EXPERIMENT.json
      Prints one line per winning (segment, arm): ARM SEGMENT, e.g.
      `short usb_speed=super,board=x86`, for the dry runs above.
  demo_report.py prometheus throughput|stopped < RESPONSE.json
      Prints a Prometheus instant-query response (the demo's two queries) as aligned lines.
  demo_report.py check REPORT.json EXPERIMENT.json
      The demo's assertions (make demo-smoke): the experiment is over; every segment has at
      least minAdaptersPerArm adapters on every arm; the USB 3 (SuperSpeed, board=x86)
      segment's primary comparison is conclusive with its 95 % interval above zero; the Pi 1
      (high-speed, board=pi1) segment's non-control arm was stopped by a guardrail; no window
      was excluded as settings_not_applied. Prints each failure, exit 1 if any.

The JSON is the protobuf JSON rxfleetctl prints (camelCase names, default values omitted).
"""
import json
import re
import sys

import yaml  # python3-yaml (scripts/install-deps)

# Metrics where a larger value is better (docs/EXPERIMENTS.md, "Metrics"); the rest: smaller.
HIGHER_IS_BETTER = {"rx_throughput_bps", "tx_throughput_bps"}
# The demo's expectations (data/seed-measurements.md): segment values, by segment key.
USB3_SEGMENT = {"usb_speed": "super", "board": "x86"}
PI1_SEGMENT = {"usb_speed": "high", "board": "pi1"}


def fmt_number(value):
    """Four significant digits, as the server's report prints them (`403.0`, `1045`)."""
    if value == 0:
        return "0"
    text = f"{value:#.4g}"
    if "e" in text:
        return f"{value:.1f}"
    return text.rstrip(".")


def unit_for(metric, values, difference=False):
    """(scale, unit) to show `values` of `metric` in one unit: bit/s in Gbit/s only when every
    value reaches 1 Gbit/s (`626.0 -> 1045 Mbit/s`), else Mbit/s, kbit/s below 1 Mbit/s; ratios in
    % (differences in percentage points); seconds in s, ms or µs by the largest value."""
    largest, smallest = max(abs(v) for v in values), min(abs(v) for v in values)
    if metric.endswith("_bps"):
        if smallest >= 1e9:
            return (1e9, "Gbit/s")
        return (1e6, "Mbit/s") if largest >= 1e6 or largest == 0 else (1e3, "kbit/s")
    if metric.endswith("_ratio"):
        return (0.01, "pp" if difference else "%")
    if metric.endswith("_seconds"):
        if largest >= 1:
            return (1.0, "s")
        return (1e-3, "ms") if largest >= 1e-3 else (1e-6, "µs")
    return (1.0, "")


def fmt_values(metric, values, signed=False, difference=False):
    """Several values of `metric` in one unit: `+263.9 .. +476.9 Mbit/s` (joined by ` .. `)."""
    scale, unit = unit_for(metric, values, difference)
    texts = [("+" if signed and v > 0 else "") + fmt_number(v / scale) for v in values]
    return " .. ".join(texts) + (f" {unit}" if unit else "")


def fmt_value(metric, value, signed=False):
    return fmt_values(metric, [value], signed, difference=signed)


# Plain names of the metric catalogue (docs/EXPERIMENTS.md, "Metrics").
METRIC_NAMES = {
    "rx_throughput_bps": "receive throughput",
    "tx_throughput_bps": "transmit throughput",
    "rtt_mean_seconds": "mean round trip",
    "rtt_p99_seconds": "p99 round trip",
    "rx_drop_ratio": "receive drop ratio",
    "probe_loss_ratio": "probe loss",
    "busiest_core_ratio": "busiest core",
    "host_cpu_ratio": "host CPU",
}


def metric_name(metric):
    return METRIC_NAMES.get(metric, metric)


def plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def segment_keys(experiment):
    return experiment.get("spec", {}).get("segmentLabelKeys", [])


def segment_text(segment, keys, sep=", "):
    """`usb_speed=super, board=x86`, keys in the experiment's order (the report's wording)."""
    ordered = [k for k in keys if k in segment] + sorted(k for k in segment if k not in keys)
    return sep.join(f"{k}={segment[k]}" for k in ordered) or "the whole fleet"


def arm_settings(experiment):
    """Arm name -> `hold 32 µs` (the fields the arm sets)."""
    out = {}
    for arm in experiment.get("spec", {}).get("arms", []):
        s = arm.get("settings", {})
        parts = []
        if "holdUs" in s:
            parts.append(f"hold {s['holdUs']} µs")
        if "countThreshold" in s:
            parts.append(f"count threshold {s['countThreshold']}")
        if "bufferKib" in s:
            parts.append(f"buffer {s['bufferKib']} KiB")
        if "enable" in s:
            parts.append("aggregation on" if s["enable"] else "aggregation off")
        out[arm.get("name", "")] = ", ".join(parts) or "no settings"
    return out


def control_arm(experiment, report):
    spec = experiment.get("spec", {})
    if spec.get("controlArm"):
        return spec["controlArm"]
    for segment in report.get("segments", []):
        for c in segment.get("comparisons", []):
            if c.get("controlArm"):
                return c["controlArm"]
    arms = spec.get("arms", [])
    return arms[0]["name"] if arms else ""


def stopped_arms(segment):
    return {a.get("arm") for a in segment.get("arms", []) if a.get("stopped")}


def primary_comparisons(report, segment):
    primary = report.get("primaryMetric", "")
    return [c for c in segment.get("comparisons", []) if c.get("metric") == primary]


def verdict(comparison):
    """`win`, `loss`, `even` (conclusive, interval spans zero) or `open` (not conclusive)."""
    if not comparison.get("conclusive"):
        return "open"
    low, high = comparison.get("ci95Low", 0.0), comparison.get("ci95High", 0.0)
    better_up = comparison.get("metric") in HIGHER_IS_BETTER
    if low > 0:
        return "win" if better_up else "loss"
    if high < 0:
        return "loss" if better_up else "win"
    return "even"


def arm_mean(segment, arm, metric):
    for a in segment.get("arms", []):
        if a.get("arm") == arm:
            for m in a.get("metrics", []):
                if m.get("metric") == metric:
                    return m.get("mean", 0.0)
    return None


def winners(report, experiment):
    """(arm, segment dict) of every segment where a non-stopped arm wins on the primary metric."""
    out = []
    for segment in report.get("segments", []):
        for c in primary_comparisons(report, segment):
            if c.get("arm") not in stopped_arms(segment) and verdict(c) == "win":
                out.append((c["arm"], segment.get("segment", {})))
    return out


def comparison_phrase(report, experiment, segment, c):
    keys = segment_keys(experiment)
    metric = c["metric"]
    where = segment_text(segment.get("segment", {}), keys)
    control = c.get("controlArm") or control_arm(experiment, report)
    before = arm_mean(segment, control, metric)
    after = arm_mean(segment, c["arm"], metric)
    diff = fmt_value(metric, c.get("diff", 0.0), True)
    interval = fmt_values(metric, [c.get("ci95Low", 0.0), c.get("ci95High", 0.0)], True, True)
    if before is not None and after is not None:
        means = fmt_values(metric, [before, after]).replace(" .. ", " -> ")
        change = f"{metric_name(metric)} {means} ({c.get('relativeDiff', 0.0) * 100:+.1f} %)"
    else:
        change = f"{metric_name(metric)} {diff}"
    units = plural(c.get("treatmentUnits", 0), "adapter")
    v = verdict(c)
    if v in ("win", "loss"):
        return f"in {where}: {change}, 95 % interval {interval} over {units}"
    if v == "even":
        return f"in {where} it makes no clear difference ({diff}, 95 % interval {interval})"
    return (f"in {where} there is no conclusion yet ({diff}; fewer adapters or windows than "
            "required)")


def sentence_results(report, experiment):
    settings = arm_settings(experiment)
    control = control_arm(experiment, report)
    by_arm = {}
    for segment in report.get("segments", []):
        stopped = stopped_arms(segment)
        for c in primary_comparisons(report, segment):
            if c.get("arm") in stopped:
                continue  # the guardrail sentence says what happened there
            by_arm.setdefault(c["arm"], {}).setdefault(verdict(c), []).append(
                comparison_phrase(report, experiment, segment, c))
    if not by_arm:
        return "No segment has a comparison of the primary metric to read."
    parts = []
    for arm, verdicts in sorted(by_arm.items()):
        clauses = []
        if verdicts.get("win"):
            clauses.append(f"beats {control} ({settings.get(control, '?')}) " +
                           "; ".join(verdicts["win"]))
        if verdicts.get("loss"):
            clauses.append(f"loses to {control} ({settings.get(control, '?')}) " +
                           "; ".join(verdicts["loss"]))
        clauses.extend(verdicts.get("even", []) + verdicts.get("open", []))
        parts.append(f"The {arm} arm ({settings.get(arm, '?')}) " + "; ".join(clauses) + ".")
    return " ".join(parts)


def guardrail_for(experiment, message):
    """The guardrail a stop message names (its metric appears in it), else the first one."""
    guardrails = experiment.get("spec", {}).get("guardrails", [])
    for g in guardrails:
        if g.get("metric") and g["metric"] in message:
            return g
    return guardrails[0] if guardrails else None


def sentence_stops(report, experiment):
    keys = segment_keys(experiment)
    settings = arm_settings(experiment)
    control = control_arm(experiment, report)
    stops = experiment.get("status", {}).get("stoppedArms", [])
    if not stops:
        return "No guardrail stopped an arm."
    parts = []
    for stop in stops:
        arm = stop.get("arm", "")
        where = (segment_text(stop.get("segment", {}), keys) if stop.get("segment")
                 else "every segment")
        g = guardrail_for(experiment, stop.get("message", ""))
        if g is not None and stop.get("reason") == "GuardrailTripped":
            op = "<=" if g.get("comparator") == "COMPARATOR_GREATER_THAN" else ">="
            metric = g.get("metric", "")
            observed = None
            for segment in report.get("segments", []):
                if segment.get("segment", {}) == stop.get("segment", {}):
                    observed = arm_mean(segment, arm, metric)
            seen = (f" when its {metric_name(metric)} was {fmt_value(metric, observed)}"
                    if observed is not None else "")
            threshold = g.get("threshold", 0.0)
            scale, unit = unit_for(metric, [threshold])
            why = (f"the guardrail {metric} {op} {threshold / scale:g} {unit} "
                   f"stopped the {arm} arm{seen}")
        else:
            why = f"the {arm} arm was stopped ({stop.get('reason', 'stopped')})"
        parts.append(f"In {where} {why}; its adapters there ran {control} "
                     f"({settings.get(control, '?')}) from then on.")
    return " ".join(parts)


def describe_selector(selector):
    """`rtl8922au adapters at super on hosts with board=x86` for a policy selector."""
    chips = selector.get("chips") or []
    parts = [(", ".join(chips) + " adapters") if chips else "adapters"]
    if selector.get("usbSpeeds"):
        parts.append("at " + ", ".join(str(v) for v in selector["usbSpeeds"]))
    if selector.get("vidPids"):
        parts.append("with VID:PID " + ", ".join(str(v) for v in selector["vidPids"]))
    for k, v in sorted((selector.get("matchLabels") or {}).items()):
        parts.append(f"on hosts with {k}={v}")
    if selector.get("adapters"):
        parts.append("named " + ", ".join(str(v) for v in selector["adapters"]))
    return " ".join(parts)


def parse_promote_preview(text):
    """(policy name, settings text, selector text, affected count) from a promote dry run, or
    None if the text does not have the expected shape."""
    head = re.search(r"-> policy/([a-z0-9-]+).*?: (\d+) adapters? affected", text)
    if not head:
        return None
    doc_lines = []
    for line in text.splitlines()[1:]:
        if line.startswith("+ ") or line.startswith("  "):
            doc_lines.append(line[2:])
        elif line.startswith("- "):
            continue
        else:
            break
    try:
        doc = yaml.safe_load("\n".join(doc_lines))
    except yaml.YAMLError:  # an unreadable document leaves only the head line's facts
        doc = None
    spec = doc.get("spec") if isinstance(doc, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
    written = spec.get("settings") if isinstance(spec.get("settings"), dict) else {}
    hold = written.get("hold")
    settings = f"hold {str(hold).replace('us', ' µs')}" if hold else ""
    selector_text = describe_selector(selector) if selector else ""
    return head.group(1), settings, selector_text, int(head.group(2))


def sentence_promote(report, experiment, previews):
    wins = winners(report, experiment)
    name = report.get("experiment") or experiment.get("metadata", {}).get("name", "")
    if not wins:
        return "No arm won anywhere, so there is nothing to promote."
    keys = segment_keys(experiment)
    settings = arm_settings(experiment)
    parts = []
    for i, (arm, segment) in enumerate(wins):
        command = (f"`rxfleetctl experiment promote {name} {arm} --segment "
                   f"{segment_text(segment, keys, ',')}`")
        preview = parse_promote_preview(previews[i]) if i < len(previews) else None
        if preview is None:
            parts.append(f"{command} would write the {arm} arm's {settings.get(arm, '?')} as a "
                         f"policy for {segment_text(segment, keys)}.")
            continue
        policy, written, selector, affected = preview
        what = written or settings.get(arm, "?")
        scope = f" for {selector}" if selector else f" for {segment_text(segment, keys)}"
        if affected == 0:
            effect = ("no register would change, since those adapters already run that outside "
                      "the experiment; the policy records the choice")
        else:
            effect = f"{plural(affected, 'adapter')} would change once the experiment is over"
        parts.append(f"{command} would write policy/{policy}, {what}{scope}: {effect}.")
    return " ".join(parts)


def read(report, experiment, previews):
    return [sentence_results(report, experiment), sentence_stops(report, experiment),
            sentence_promote(report, experiment, previews)]


def find_segment(report, values):
    for segment in report.get("segments", []):
        if all(segment.get("segment", {}).get(k) == v for k, v in values.items()):
            return segment
    return None


def check(report, experiment):
    """The demo's assertions; returns a list of failures (empty = all hold)."""
    failures = []
    keys = segment_keys(experiment)
    if report.get("phase") not in ("EXPERIMENT_PHASE_COMPLETED",):
        failures.append(f"experiment phase {report.get('phase')}, expected COMPLETED "
                        "(STOPPED would mean every arm was stopped)")
    minimum = experiment.get("spec", {}).get("minAdaptersPerArm", 3)
    if not report.get("segments"):
        failures.append("the report has no segments")
    for segment in report.get("segments", []):
        for arm in segment.get("arms", []):
            if arm.get("adapters", 0) < minimum:
                failures.append(f"{segment_text(segment.get('segment', {}), keys)}: arm "
                                f"{arm.get('arm')} has {arm.get('adapters', 0)} adapters, fewer "
                                f"than minAdaptersPerArm {minimum}")
    usb3 = find_segment(report, USB3_SEGMENT)
    if usb3 is None:
        failures.append(f"no segment {segment_text(USB3_SEGMENT, keys)}")
    else:
        comparisons = primary_comparisons(report, usb3)
        if not comparisons:
            failures.append(f"{segment_text(USB3_SEGMENT, keys)}: no primary comparison")
        for c in comparisons:
            where = f"{segment_text(USB3_SEGMENT, keys)} {c.get('arm')} vs {c.get('controlArm')}"
            if not c.get("conclusive"):
                failures.append(f"{where}: not conclusive")
            if not c.get("ci95Low", 0.0) > 0:
                failures.append(f"{where}: 95 % interval {c.get('ci95Low', 0.0)} .. "
                                f"{c.get('ci95High', 0.0)} does not lie above zero")
    pi1 = find_segment(report, PI1_SEGMENT)
    control = control_arm(experiment, report)
    if pi1 is None:
        failures.append(f"no segment {segment_text(PI1_SEGMENT, keys)}")
    else:
        others = [a.get("arm") for a in pi1.get("arms", []) if a.get("arm") != control]
        not_stopped = [a for a in others if a not in stopped_arms(pi1)]
        if not others or not_stopped:
            failures.append(f"{segment_text(PI1_SEGMENT, keys)}: arm(s) "
                            f"{', '.join(not_stopped) or '(none)'} not stopped by a guardrail")
        reasons = [s.get("reason") for s in experiment.get("status", {}).get("stoppedArms", [])
                   if s.get("segment", {}) == PI1_SEGMENT]
        if reasons and any(r != "GuardrailTripped" for r in reasons):
            failures.append(f"{segment_text(PI1_SEGMENT, keys)}: stopped for {reasons}, "
                            "expected GuardrailTripped")
    texts = [n.get("message", "") for n in report.get("notes", [])] + [report.get("text", "")]
    if any("settings_not_applied" in t for t in texts):
        note = next((t for t in texts if "settings_not_applied" in t), "")
        failures.append(f"windows excluded as settings_not_applied: {note.splitlines()[0]}")
    return failures


def prometheus_rows(kind, response):
    """Lines for a Prometheus instant-query response: `throughput` (one line per board, USB
    speed and arm, in Mbit/s) or `stopped` (one line per stopped arm and segment)."""
    rows = response.get("data", {}).get("result", [])
    lines = []
    if kind == "throughput":
        keys = ("board", "usb_speed", "arm")
        for m in sorted(rows, key=lambda m: tuple(m["metric"].get(k, "") for k in keys)):
            labels = "  ".join(f"{k}={m['metric'].get(k, '-'):<6}" for k in keys)
            lines.append(f"    {labels} {float(m['value'][1]) / 1e6:7.1f} Mbit/s")
    else:
        for m in rows:
            lines.append(f"    arm={m['metric'].get('arm', '-')}  "
                         f"segment={m['metric'].get('segment', '-')}")
    return lines or ["    (no data)"]


def wrap(text, width=100):
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return "\n".join(lines)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main(argv):
    if len(argv) == 3 and argv[1] == "prometheus" and argv[2] in ("throughput", "stopped"):
        print("\n".join(prometheus_rows(argv[2], json.load(sys.stdin))))
        return 0
    if len(argv) < 4 or argv[1] not in ("read", "promote-args", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    report, experiment = load(argv[2]), load(argv[3])
    if argv[1] == "promote-args":
        for arm, segment in winners(report, experiment):
            print(arm, segment_text(segment, segment_keys(experiment), ","))
        return 0
    if argv[1] == "read":
        previews = []
        for path in argv[4:]:
            try:
                with open(path, encoding="utf-8") as f:
                    previews.append(f.read())
            except OSError:
                previews.append("")
        for sentence in read(report, experiment, previews):
            print(wrap(sentence))
        return 0
    failures = check(report, experiment)
    for failure in failures:
        print(f"demo check: {failure}", file=sys.stderr)
    if not failures:
        print("demo check: USB 3 segment conclusive with its interval above zero, the Pi 1 short "
              "arm stopped by its guardrail, no settings_not_applied windows")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
