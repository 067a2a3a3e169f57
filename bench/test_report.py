"""Tests of bench/report.py's rendering, on the JSON samples in bench/testdata/
(the figures of the page's earlier runs, in the formats the scripts write).

    python3 bench/test_report.py
"""
import json
import pathlib
import shutil
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import report  # noqa: E402

SAMPLES = HERE / "testdata"


def skeleton(names=report.SECTIONS):
    """A page with prose around an empty block of each name."""
    parts = ["# Title\n\nProse before.\n"]
    for n in names:
        parts.append(f"## {n}\n\nProse about {n}.\n\n{report.begin(n)}\nold figures\n{report.end(n)}\n\nAfter {n}.\n")
    return "\n".join(parts)


def blocks(page):
    """{name: text between its markers}."""
    out = {}
    for n in report.SECTIONS:
        if report.begin(n) in page:
            out[n] = page.split(report.begin(n), 1)[1].split(report.end(n), 1)[0]
    return out


def prose(page):
    """The page with every block's contents taken out."""
    for n, text in blocks(page).items():
        page = page.replace(text, "\n")
    return page


class Rendering(unittest.TestCase):
    def test_every_block_is_filled_from_the_samples_and_the_prose_is_kept(self):
        page = skeleton()
        out = report.fill(page, SAMPLES)
        self.assertEqual(prose(out), prose(page))
        for name, text in blocks(out).items():
            self.assertNotIn("old figures", text, name)
        b = blocks(out)
        for name in ("stubs", "startup", "plugins", "mq", "grpc", "emit", "scaleout", "lifecycle"):
            self.assertNotIn(report.NM, b[name], name)
        self.assertIn("| static stub, req/s | 125,979 | 144,520 (nginx) | 0.87× | 43,010 | 2.93× |", b["summary"])
        self.assertIn("| 32 | decoy, `reuseport` (the default) | 56,575 | 0.70× | 3.75 ms | 3.68× | 40,510 | 4.52 ms | 0.50× |",
                      b["tail"])
        self.assertIn("| MQTT: QoS 0, window 100 | 17,459 | 45.4 | 40,033 | 7.7 | bare rumqttc echo | 0.44× |", b["mq"])
        self.assertIn("decoy 3.2 KiB, WireMock 57.9 KiB", b["stubs"])

    def test_filling_twice_gives_the_same_page(self):
        once = report.fill(skeleton(), SAMPLES)
        self.assertEqual(report.fill(once, SAMPLES), once)

    def test_a_server_that_fell_behind_the_fixed_rate_is_said_to_have_and_gets_no_ratio(self):
        tail = blocks(report.fill(skeleton(), SAMPLES))["tail"]
        row = next(line for line in tail.splitlines() if line.startswith("| 32 | WireMock"))
        self.assertIn("fell behind the rate (29,396/s answered)", row)
        self.assertTrue(row.endswith("| — |"), row)

    def test_a_figure_without_its_file_is_not_measured_in_this_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            for f in SAMPLES.glob("*.json"):
                if f.name not in ("tail.json", "scale_out.json"):
                    shutil.copy(f, tmp)
            b = blocks(report.fill(skeleton(), tmp))
        self.assertIn("Not measured in this run (`bench/tail.py`)", b["tail"])
        self.assertIn("Not measured in this run (`bench/scale_out.py`", b["scaleout"])
        row = next(line for line in b["summary"].splitlines() if line.startswith("| p99, 32 connections, closed"))
        self.assertIn(report.NM, row)
        self.assertIn("| static stub, req/s | 125,979 |", b["summary"])

    def test_the_delay_case_of_tail_json_fills_the_fixed_rate_cells(self):
        with tempfile.TemporaryDirectory() as tmp:
            for f in SAMPLES.glob("*.json"):
                shutil.copy(f, tmp)
            t = json.loads((SAMPLES / "tail.json").read_text())
            t["medians"]["decoy-reuseport/delay-100ms-1000"] = {"rps": 9700, "p99": 110.0, "f_rate": 5000,
                                                               "f_achieved": 5000, "f_p99": 104.2}
            (pathlib.Path(tmp) / "tail.json").write_text(json.dumps(t))
            b = blocks(report.fill(skeleton(), tmp))
        row = next(line for line in b["tail"].splitlines() if line.startswith("| decoy | 9,731"))
        self.assertIn("| 5,000 | 104.20 ms |", row)
        self.assertNotIn("delay", "".join(line for line in b["tail"].splitlines() if line.startswith("| 32 ")))

    def test_only_rewrites_the_named_blocks(self):
        out = report.fill(skeleton(), SAMPLES, only=["grpc"])
        b = blocks(out)
        self.assertIn("decoy static unary", b["grpc"])
        self.assertEqual(b["tail"].strip(), "old figures")

    def test_a_page_without_a_blocks_markers_is_refused_with_its_name(self):
        with self.assertRaises(SystemExit) as e:
            report.fill(skeleton([n for n in report.SECTIONS if n != "mq"]), SAMPLES)
        self.assertIn("mq", str(e.exception))

    def test_the_transports_only_flag_selects_the_mq_grpc_and_emit_blocks(self):
        with tempfile.TemporaryDirectory() as tmp:
            page = pathlib.Path(tmp) / "page.md"
            page.write_text(skeleton())
            report.main(["--transports-only", "--out-dir", str(SAMPLES), "--page", str(page)])
            b = blocks(page.read_text())
        self.assertEqual({n for n, t in b.items() if t.strip() != "old figures"}, {"mq", "grpc", "emit"})

    def test_the_page_in_docs_has_every_block(self):
        page = (HERE.parent / "docs" / "performance.md").read_text()
        self.assertEqual(set(blocks(page)), set(report.SECTIONS))


if __name__ == "__main__":
    unittest.main()
