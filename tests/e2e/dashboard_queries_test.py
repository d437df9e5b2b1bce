#!/usr/bin/env python3
"""Every panel query of deploy/grafana/dashboards/*.json, run against the real Prometheus of
scripts/demo (fed by real agents under rxfleet-emulate and the real server), must return data.

Run by scripts/demo --smoke --check (ctest e2e_dashboard_queries), which sets
RXFLEET_DEMO_PROMETHEUS_URL. Grafana's variables become the values a user sees first: `.*` for
the multi-value ones (All), the first experiment and its first arm for experiment/control; the
macros $__rate_interval / $__interval become 10s (the demo scrapes every second).

Exceptions (the query must still be accepted by Prometheus, but may be empty), kept short:
  - series that exist only while an experiment runs (rxfleet_adapter_experiment_info,
    rxfleet_server_experiment_*), when the demo could not start one;
  - rxfleet_adapter_failures_total: exists only after a failed reconcile, which the demo's
    healthy labs never have (tests/agent/telemetry forces one with a stalled transfer);
  - rxfleet_server_experiment_arm_stopped: exists only once a guardrail stopped an arm (the
    server exports stopped arms only; alert RxfleetExperimentArmStopped).
Each query runs as a range query over the last 5 minutes, as a panel would, and is polled
until it has a finite value or the deadline passes (rates need a few samples).
"""
import json
import os
import sys
import time
import urllib.parse
import urllib.request

DEADLINE_SECONDS = 60
MAY_BE_EMPTY_ALWAYS = ("rxfleet_adapter_failures_total", "rxfleet_server_experiment_arm_stopped")
EXPERIMENT_SERIES = ("rxfleet_adapter_experiment_info", "rxfleet_server_experiment_")


def get(prom, path, params):
    url = f"{prom}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {body}")
    return body["data"]


def query(prom, expr):
    """Values of expr over the last 5 minutes (2 s steps): a panel shows a time range, and the
    experiment's series end with it, so data anywhere in the range counts."""
    now = time.time()
    result = get(prom, "/api/v1/query_range",
                 {"query": expr, "start": now - 300, "end": now, "step": 2})["result"]
    return [v for series in result for _, v in series.get("values", [])]


def substitute(expr, variables):
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", variables[name]).replace("$" + name, variables[name])
    for macro, value in (("$__rate_interval", "10s"), ("$__interval", "10s"), ("$__range", "1h")):
        expr = expr.replace(macro, value)
    if "$" in expr:
        raise ValueError(f"unknown variable in {expr}")
    return expr


def main():
    src = sys.argv[1]
    prom = os.environ["RXFLEET_DEMO_PROMETHEUS_URL"]
    experiments = get(prom, "/api/v1/label/experiment/values", {})
    experiment_running = bool(experiments)
    experiment = experiments[0] if experiments else "none"
    arms = get(prom, "/api/v1/label/arm/values",
               {"match[]": f'rxfleet_adapter_experiment_info{{experiment="{experiment}"}}'})
    control = arms[0] if arms else "none"

    checks = []  # (dashboard, title, expr, may_be_empty)
    dash_dir = os.path.join(src, "deploy", "grafana", "dashboards")
    for name in sorted(os.listdir(dash_dir)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(dash_dir, name)) as f:
            dash = json.load(f)
        variables = {}
        for var in dash.get("templating", {}).get("list", []):
            variables[var["name"]] = ".*" if var.get("includeAll") or var.get("multi") else None
        variables["experiment"] = experiment
        variables["control"] = control
        missing = [v for v, value in variables.items() if value is None]
        if missing:
            raise ValueError(f"{name}: no test value for variables {missing}")
        panels = list(dash.get("panels", []))
        for row in dash.get("panels", []):
            panels += row.get("panels", [])
        for panel in panels:
            for target in panel.get("targets", []):
                raw = target["expr"]
                may_be_empty = any(s in raw for s in MAY_BE_EMPTY_ALWAYS) or (
                    not experiment_running and any(s in raw for s in EXPERIMENT_SERIES))
                checks.append((name, panel["title"], substitute(raw, variables), may_be_empty))
        for var in dash.get("templating", {}).get("list", []):
            q = var.get("query")
            q = q.get("query", "") if isinstance(q, dict) else (q or "")
            if q.startswith("label_values(") and "," in q:
                selector = substitute(q[len("label_values("):q.rindex(",")], variables)
                may_be_empty = not experiment_running and any(s in selector for s in EXPERIMENT_SERIES)
                checks.append((name, f"variable {var['name']}", selector, may_be_empty))

    pending = list(checks)
    failures = []
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        still = []
        for check in pending:
            name, title, expr, may_be_empty = check
            try:
                result = query(prom, expr)
            except Exception as e:  # a query Prometheus rejects fails at once
                failures.append(f"{name} / {title}: rejected: {e}\n    {expr}")
                continue
            values = result
            if any(v not in ("NaN", "+Inf", "-Inf") for v in values) or may_be_empty:
                continue
            still.append(check)
        pending = still
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(1)
    for name, title, expr, _ in pending:
        failures.append(f"{name} / {title}: no data within {DEADLINE_SECONDS} s\n    {expr}")
    skipped = sum(1 for c in checks if c[3])
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    print(f"dashboard queries: {len(checks)} run, {len(checks) - skipped} required data, "
          f"{skipped} allowed empty ({'experiment running' if experiment_running else 'no experiment'}), "
          f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
