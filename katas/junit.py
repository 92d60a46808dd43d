"""`kata check --junit FILE`: the JSON report (the source; docs/json.md) as JUnit XML, which GitHub, GitLab and
Jenkins render as test results.

One test suite per checked script; one test case for the run itself (it ran as a training script, to its end or to
the prefix asked), then one per check: a symptom is a ``<failure>`` whose message is what was seen and whose text is
the evidence (measured against the threshold, and the diagnosis where the report names causes); a check that failed
to observe is an ``<error>``; one that did not apply or could not tell is ``<skipped>`` with the reason; advice
passes, its figure in the case's ``<system-out>``. The script's output tail is the suite's ``<system-out>``.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import PurePath

SKIPPED = {"n/a": "does not apply", "cannot-tell": "cannot tell"}


def junit_xml(doc: dict) -> str:
    """The JUnit XML document of one `kata check --json` report."""
    suite_name = f"kata check {doc['script']}"
    classname = "kata.check." + PurePath(doc["script"]).stem
    suite = ET.Element("testsuite", name=suite_name, time=f"{doc['seconds']:.3f}")
    properties = ET.SubElement(suite, "properties")
    for name in ("schema", "verdict", "exit_code", "device", "disclosure"):
        ET.SubElement(properties, "property", name=name, value=str(doc[name]))
    if doc.get("prefix"):
        ET.SubElement(properties, "property", name="prefix", value=doc["prefix"]["asked"])
    cases = [_run_case(doc, classname), *(_check_case(p, classname, doc["disclosure"]) for p in doc["probes"])]
    suite.extend(cases)
    out = ET.SubElement(suite, "system-out")
    out.text = _clean(doc["output_tail"])
    for kind in ("failure", "error", "skipped"):
        suite.set(kind + "s" if kind != "skipped" else kind, str(sum(c.find(kind) is not None for c in cases)))
    suite.set("tests", str(len(cases)))
    root = ET.Element("testsuites", name="kata check", tests=suite.get("tests"), failures=suite.get("failures"),
                      errors=suite.get("errors"), skipped=suite.get("skipped"), time=suite.get("time"))
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _run_case(doc: dict, classname: str) -> ET.Element:
    """The run itself: a failure when the script did not run as a training script (or was never started)."""
    case = ET.Element("testcase", classname=classname, name="the script runs as a training script",
                      time=f"{doc['seconds']:.3f}")
    if doc["verdict"] not in ("pass", "fail"):
        failure = ET.SubElement(case, "failure", message=_clean(doc["problem"]), type=doc["verdict"])
        failure.text = _clean(doc["detail"] or doc["problem"])
    notes = list(doc["notes"])
    if notes:
        ET.SubElement(case, "system-out").text = _clean("\n".join(notes))
    return case


def _check_case(probe: dict, classname: str, disclosure: str) -> ET.Element:
    name = probe.get("probe") or probe["check"]
    case = ET.Element("testcase", classname=classname, name=f"{name}: {probe['title']}")
    status = probe["status"]
    evidence = _evidence(probe)
    if status in ("fail", "error"):
        kind = "failure" if status == "fail" else "error"
        element = ET.SubElement(case, kind, message=_clean(probe["observed"]), type=status)
        element.text = _clean("\n".join(filter(None, [probe["observed"], evidence, probe.get("message", "")])))
    elif status in SKIPPED:
        ET.SubElement(case, "skipped", message=_clean(f"{SKIPPED[status]}: {probe['observed']}"))
    elif status == "advice":
        ET.SubElement(case, "system-out").text = _clean(f"advice: {probe['observed']}\n{evidence}".strip())
    return case


def _evidence(probe: dict) -> str:
    if probe["measured"] and probe["threshold"]:
        return f"measured {probe['measured']}; expected {probe['threshold']}"
    return probe["measured"]


def _clean(text: str) -> str:
    """XML 1.0 cannot hold most control characters (a script's output may): each becomes U+FFFD."""
    return "".join(c if c in "\t\n\r" or ord(c) >= 32 else "\ufffd" for c in text)
