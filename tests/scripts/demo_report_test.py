#!/usr/bin/env python3
"""scripts/demo_report.py on the report, experiment and promote dry run of a real `make demo`
run (tests/fixtures/demo/: 4 RTL8922AU at SuperSpeed on x86, 2 at high-speed on a Pi 5, 3 on a
Pi 1's USB 2; the Pi 1 short arm stopped by the drop guardrail), and on variants of it that
must read differently or fail the demo's checks.

Usage: demo_report_test.py SOURCE_DIR
"""
import copy
import importlib.util
import os
import sys
import unittest

SOURCE_DIR = (sys.argv.pop(1) if len(sys.argv) > 1
              else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
spec = importlib.util.spec_from_file_location(
    "demo_report", os.path.join(SOURCE_DIR, "scripts", "demo_report.py"))
demo_report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo_report)
FIXTURES = os.path.join(SOURCE_DIR, "tests", "fixtures", "demo")


def fixture(name):
    path = os.path.join(FIXTURES, name)
    if name.endswith(".json"):
        return demo_report.load(path)
    with open(path, encoding="utf-8") as f:
        return f.read()


def segment(report, board):
    return next(s for s in report["segments"] if s["segment"]["board"] == board)


def primary(report, board):
    return next(c for c in segment(report, board)["comparisons"]
                if c["metric"] == report["primaryMetric"])


class ReadTest(unittest.TestCase):
    def setUp(self):
        self.report = fixture("report.json")
        self.experiment = fixture("experiment.json")
        self.preview = fixture("promote-short-usb3-x86.txt")

    def sentences(self, previews=None):
        return demo_report.read(self.report, self.experiment,
                                [self.preview] if previews is None else previews)

    def test_three_sentences_say_what_won_what_stopped_and_what_promote_writes(self):
        results, stops, promote = self.sentences()
        # Won: the USB 3 segment, with the report's own figures.
        self.assertIn("The short arm (hold 32 µs) beats long (hold 1024 µs) in "
                      "usb_speed=super, board=x86: receive throughput 613.4 -> 996.5 Mbit/s "
                      "(+62.4 %), 95 % interval +363.1 .. +403.0 Mbit/s over 4 adapters", results)
        # The Pi 5 at high-speed: the interval includes zero.
        self.assertIn("in usb_speed=high, board=pi5 it makes no clear difference", results)
        # The stopped Pi 1 arm is not read as a result, but in the guardrail sentence.
        self.assertNotIn("pi1", results)
        self.assertEqual(
            stops, "In usb_speed=high, board=pi1 the guardrail rx_drop_ratio <= 5 % stopped the "
            "short arm when its receive drop ratio was 85.70 %; its adapters there ran long "
            "(hold 1024 µs) from then on.")
        self.assertEqual(
            promote, "`rxfleetctl experiment promote demo-hold short --segment "
            "usb_speed=super,board=x86` would write policy/demo-hold-short, hold 32 µs for "
            "rtl8922au adapters at super on hosts with board=x86: no register would change, "
            "since those adapters already run that outside the experiment; the policy records "
            "the choice.")

    def test_promote_sentence_counts_the_adapters_the_dry_run_names(self):
        preview = self.preview.replace("0 adapters affected", "4 adapters affected")
        self.assertIn("4 adapters would change once the experiment is over",
                      self.sentences([preview])[2])

    def test_without_a_readable_dry_run_the_promote_sentence_claims_no_count(self):
        promote = self.sentences(["rxfleetctl: error: connection refused"])[2]
        self.assertIn("would write the short arm's hold 32 µs as a policy for "
                      "usb_speed=super, board=x86", promote)
        self.assertNotIn("register", promote)
        self.assertEqual(self.sentences([])[2], promote)

    def test_a_conclusive_loss_and_a_lower_is_better_metric_read_as_such(self):
        c = primary(self.report, "x86")
        c["diff"], c["ci95Low"], c["ci95High"] = -3e8, -3.4e8, -2.6e8
        results = self.sentences()[0]
        self.assertIn("loses to long (hold 1024 µs) in usb_speed=super, board=x86", results)
        self.assertEqual(demo_report.verdict(
            {"metric": "rtt_p99_seconds", "conclusive": True, "ci95Low": -2e-3,
             "ci95High": -1e-3}), "win")
        self.assertEqual(demo_report.verdict(
            {"metric": "rtt_p99_seconds", "conclusive": False, "ci95Low": -2e-3,
             "ci95High": -1e-3}), "open")
        self.assertEqual(demo_report.winners(self.report, self.experiment), [])

    def test_no_stop_and_no_winner_say_so(self):
        self.experiment["status"]["stoppedArms"] = []
        for s in self.report["segments"]:
            for a in s["arms"]:
                a.pop("stopped", None)
            for c in s["comparisons"]:
                c.pop("conclusive", None)
        results, stops, promote = self.sentences([])
        self.assertEqual(stops, "No guardrail stopped an arm.")
        self.assertEqual(promote, "No arm won anywhere, so there is nothing to promote.")
        self.assertIn("in usb_speed=super, board=x86 there is no conclusion yet", results)

    def test_winners_name_the_dry_runs_to_ask_for(self):
        self.assertEqual(demo_report.winners(self.report, self.experiment),
                         [("short", {"board": "x86", "usb_speed": "super"})])
        self.assertEqual(demo_report.segment_text({"board": "x86", "usb_speed": "super"},
                                                  ["usb_speed", "board"], ","),
                         "usb_speed=super,board=x86")

    def test_values_keep_one_unit(self):
        self.assertEqual(demo_report.fmt_values("rx_throughput_bps", [6.251e8, 1.0452e9]),
                         "625.1 .. 1045 Mbit/s")
        self.assertEqual(demo_report.fmt_value("rx_throughput_bps", 1.256e5, True),
                         "+125.6 kbit/s")
        self.assertEqual(demo_report.fmt_values("rx_throughput_bps", [-1e5, 3e8], True, True),
                         "-0.1000 .. +300.0 Mbit/s")
        self.assertEqual(demo_report.fmt_value("rx_drop_ratio", 0.857), "85.70 %")
        self.assertEqual(demo_report.fmt_value("rx_drop_ratio", 0.8126, True), "+81.26 pp")
        self.assertEqual(demo_report.fmt_value("rtt_p99_seconds", 0.00129), "1.290 ms")


class CheckTest(unittest.TestCase):
    def setUp(self):
        self.report = fixture("report.json")
        self.experiment = fixture("experiment.json")

    def failures(self):
        return demo_report.check(self.report, self.experiment)

    def test_the_real_run_passes(self):
        self.assertEqual(self.failures(), [])

    def test_an_interval_reaching_zero_fails(self):
        primary(self.report, "x86")["ci95Low"] = -1e6
        self.assertEqual(len(self.failures()), 1)
        self.assertIn("does not lie above zero", self.failures()[0])

    def test_an_inconclusive_usb3_comparison_fails(self):
        primary(self.report, "x86").pop("conclusive", None)
        self.assertIn("not conclusive", " ".join(self.failures()))

    def test_a_pi1_short_arm_still_running_fails(self):
        for a in segment(self.report, "pi1")["arms"]:
            a.pop("stopped", None)
        self.assertIn("not stopped by a guardrail", " ".join(self.failures()))

    def test_an_operator_stop_is_not_the_guardrail(self):
        self.experiment["status"]["stoppedArms"][0]["reason"] = "OperatorStopped"
        self.assertIn("expected GuardrailTripped", " ".join(self.failures()))

    def test_settings_not_applied_windows_fail(self):
        for note in self.report["notes"]:
            if note["code"] == "excluded_windows":
                note["message"] = ("122 of 270 windows were not used: invalid:burn_in 114, "
                                   "invalid:settings_not_applied 8.")
        self.assertIn("settings_not_applied", " ".join(self.failures()))

    def test_a_segment_below_the_minimum_adapters_fails(self):
        segment(self.report, "pi5")["arms"][0]["adapters"] = 1
        self.assertIn("fewer than minAdaptersPerArm 2", " ".join(self.failures()))

    def test_a_missing_segment_or_an_unfinished_experiment_fails(self):
        report = copy.deepcopy(self.report)
        report["segments"] = [s for s in report["segments"] if s["segment"]["board"] != "x86"]
        report["phase"] = "EXPERIMENT_PHASE_RUNNING"
        failures = demo_report.check(report, self.experiment)
        self.assertIn("no segment usb_speed=super, board=x86", " ".join(failures))
        self.assertIn("expected COMPLETED", " ".join(failures))


class PrometheusTest(unittest.TestCase):
    def test_rows_are_sorted_and_in_mbit(self):
        response = {"data": {"result": [
            {"metric": {"board": "x86", "usb_speed": "super", "arm": "short"},
             "value": [0, "9.4e8"]},
            {"metric": {"board": "pi1", "usb_speed": "high", "arm": "long"},
             "value": [0, "4.7e7"]},
        ]}}
        rows = demo_report.prometheus_rows("throughput", response)
        self.assertEqual(len(rows), 2)
        self.assertIn("board=pi1", rows[0])
        self.assertTrue(rows[1].endswith("940.0 Mbit/s"), rows[1])
        self.assertEqual(demo_report.prometheus_rows("stopped", {"data": {"result": []}}),
                         ["    (no data)"])


if __name__ == "__main__":
    unittest.main()
