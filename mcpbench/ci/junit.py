"""Suites as JUnit XML, the format CI test reporters read (Jenkins, GitLab, GitHub test-report actions).

    <testsuites name="mcpbench replay" tests=… failures=… errors=… skipped=… time=…>
      <testsuite name="TRACE" tests=… failures=… errors=… skipped=… time=… timestamp=…>
        <testcase classname="…" name="…" time="…">
          <failure message="one line" type="failed">every changed path</failure>
          <system-out>latencies</system-out>
        </testcase>

Text that XML 1.0 cannot hold (most control characters) is left out; secrets are redacted by
their shape, as in every report.
"""

import re
import time
from collections.abc import Sequence
from xml.etree import ElementTree

from mcpbench.ci.cases import ERROR, FAILED, SKIPPED, Suite
from mcpbench.trace.redact import Redactor

# Characters XML 1.0 does not allow, even escaped.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# A one-line message attribute longer than this is cut (the whole text is the element's body).
MESSAGE_CHARS = 500


def to_xml(suites: Sequence[Suite], name: str) -> bytes:
    """The JUnit XML document of `suites`, under one `<testsuites name=name>`."""
    redactor = Redactor()

    def text(value: str) -> str:
        return _NOT_XML.sub("", redactor.text(value))

    root = ElementTree.Element("testsuites", name=text(name))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    elapsed = 0.0
    for suite in suites:
        counts = {"tests": len(suite.cases), "failures": suite.count(FAILED), "errors": suite.count(ERROR),
                  "skipped": suite.count(SKIPPED)}
        seconds = suite.time if suite.time is not None else sum(case.time or 0.0 for case in suite.cases)
        node = ElementTree.SubElement(root, "testsuite", name=text(suite.name), timestamp=stamp,
                                      time=f"{seconds:.3f}", **{key: str(value) for key, value in counts.items()})
        for case in suite.cases:
            element = ElementTree.SubElement(node, "testcase", classname=text(case.classname), name=text(case.name),
                                             time=f"{case.time or 0.0:.3f}")
            tag = {FAILED: "failure", ERROR: "error", SKIPPED: "skipped"}.get(case.status)
            if tag is not None:
                child = ElementTree.SubElement(element, tag, message=text(case.message)[:MESSAGE_CHARS])
                if tag != "skipped":
                    child.set("type", case.status)
                    child.text = text(case.detail or case.message)
            if case.output:
                ElementTree.SubElement(element, "system-out").text = text(case.output)
        if suite.notes:
            ElementTree.SubElement(node, "system-out").text = text("\n".join(suite.notes))
        for key in totals:
            totals[key] += counts[key]
        elapsed += seconds
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{elapsed:.3f}")
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
